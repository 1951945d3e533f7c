/**
 * What an entry costs the memory store, estimated in bytes when it is written (never on a hit):
 * its key, its tags and its value. The estimate is an approximation of the heap the entry holds,
 * cheap and bounded however large or deep the value: a string counts its length (plus a header),
 * a number 8, an object or array a header plus its keys and slots and what they hold. At most
 * SIZE_WALK_NODES nodes are visited and at most SIZE_WALK_DEPTH levels; past those, a list or an
 * object is counted as its visited part scaled to its length, and a deeper value as a flat object.
 * Shared sub-objects are counted each time they are reached (an overestimate, never a loop: the
 * depth is bounded).
 */
import type { Entry } from './freshness';
import { settledValue } from './settled';

/** Nodes visited at most per value. */
export const SIZE_WALK_NODES = 2048;
/** Levels walked at most; deeper values count as a flat header. */
export const SIZE_WALK_DEPTH = 32;

const HEADER = 16;
const SLOT = 8;
/** The header and slot sizes, for a producer that measures its own values (see Entry.valueBytes). */
export { HEADER as SIZE_HEADER, SLOT as SIZE_SLOT };
/** The entry object itself (freshness, grace, the tag arrays' headers). */
const ENTRY_OVERHEAD = 96;

/** The estimated bytes of `entry` stored under `key`: at least 1 (lru-cache's rule). */
export function entrySize(key: string, entry: Entry): number {
  let size = ENTRY_OVERHEAD + key.length;
  const tags = entry.tags;
  if (tags !== undefined) for (const tag of tags) size += HEADER + SLOT + tag.length;
  if (entry.tagVersions !== undefined) size += entry.tagVersions.length * SLOT;
  // Measured by the code that built the value, by these rules, in a walk it made anyway (the
  // response layer's one pass over a result): not walked again.
  return size + (entry.valueBytes ?? valueSize(entry.value));
}

/** The estimated bytes of a value (see above). */
export function valueSize(value: unknown): number {
  const walk = { left: SIZE_WALK_NODES };
  return sizeOf(value, 0, walk);
}

function sizeOf(value: unknown, depth: number, walk: { left: number }): number {
  walk.left--;
  if (value instanceof Promise) value = settledValue(value); // a settled one held by the value: its value's size
  switch (typeof value) {
    case 'string':
      return HEADER + value.length;
    case 'number':
    case 'boolean':
    case 'undefined':
    case 'symbol':
    case 'function':
      return SLOT;
    case 'bigint':
      return HEADER + Math.ceil(value.toString(16).length / 2);
    default:
      break;
  }
  if (value === null) return SLOT;
  if (depth >= SIZE_WALK_DEPTH || walk.left <= 0) return HEADER;
  if (ArrayBuffer.isView(value)) return HEADER + value.byteLength;
  if (value instanceof ArrayBuffer) return HEADER + value.byteLength;
  if (Array.isArray(value)) {
    const length = value.length;
    const size = HEADER + length * SLOT;
    let i = 0;
    let walked = 0;
    for (; i < length && walk.left > 0; i++) walked += sizeOf(value[i], depth + 1, walk);
    // Not all visited: the rest are counted like the visited ones, on average.
    return size + (i === length ? walked : i === 0 ? 0 : Math.ceil((walked / i) * length));
  }
  if (value instanceof Map || value instanceof Set) {
    let size = HEADER + value.size * 2 * SLOT;
    let i = 0;
    let walked = 0;
    for (const item of value.entries()) {
      if (walk.left <= 0) break;
      walked += sizeOf(item[0], depth + 1, walk) + sizeOf(item[1], depth + 1, walk);
      i++;
    }
    size += i === value.size ? walked : i === 0 ? 0 : Math.ceil((walked / i) * value.size);
    return size;
  }
  const size = HEADER;
  let keys = 0;
  let walked = 0;
  let visited = 0;
  for (const key in value as Record<string, unknown>) {
    keys++;
    if (walk.left <= 0) continue; // still counting keys, cheaply: the rest are scaled below
    visited++;
    walked += SLOT + HEADER + key.length + sizeOf((value as Record<string, unknown>)[key], depth + 1, walk);
  }
  return (
    size + (visited === keys ? walked : visited === 0 ? keys * (SLOT + HEADER) : Math.ceil((walked / visited) * keys))
  );
}

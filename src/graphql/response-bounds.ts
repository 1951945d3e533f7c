/**
 * The size bounds of a response walk (./response-result) for values outside the selections: a
 * scalar, or a custom scalar's JSON (a JSON scalar's object). Each adds a bound of its JSON's UTF-8
 * bytes and core/sizes' estimate of its heap; a value the bound does not judge (a class, a toJSON,
 * deeper than MAX_DEPTH) clears `bounded`: the result is then serialized to know.
 */
import { SIZE_HEADER, SIZE_SLOT } from '../core/sizes';

/** What a walk adds up. */
export interface Bounds {
  maxBytes: number;
  heapBytes: number;
  bounded: boolean;
}

/** core/sizes' rules, read once (an imported binding may be a getter call per read, once compiled to CommonJS). */
export const HEAP_HEADER = SIZE_HEADER;
export const HEAP_SLOT = SIZE_SLOT;
/** Custom scalar values deeper than this are not bounded (a cycle would never end): serialized instead. */
const MAX_DEPTH = 64;
/** The longest JSON of a number (sign, 17 significant digits, point, exponent), rounded up. */
const NUMBER_MAX = 32;

/** A value outside the selections (a scalar, or a custom scalar's JSON): its bytes only. */
export function leaf(walk: Bounds, value: unknown, depth: number): void {
  switch (typeof value) {
    case 'string':
      // Each UTF-16 unit is 1 to 3 bytes of UTF-8, or an escape of at most 6 (`\u001f`, a lone surrogate).
      walk.maxBytes += value.length * 6 + 2;
      walk.heapBytes += HEAP_HEADER + value.length;
      return;
    case 'number':
      walk.maxBytes += NUMBER_MAX;
      walk.heapBytes += HEAP_SLOT;
      return;
    case 'boolean':
      walk.maxBytes += 5;
      walk.heapBytes += HEAP_SLOT;
      return;
    case 'undefined': // an array's hole: `null`
      walk.maxBytes += 4;
      walk.heapBytes += HEAP_SLOT;
      return;
    case 'object':
      break;
    default: // bigint, function, symbol: left to JSON.stringify's own rules
      walk.bounded = false;
      return;
  }
  if (value === null) {
    walk.maxBytes += 4;
    walk.heapBytes += HEAP_SLOT;
    return;
  }
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (depth > MAX_DEPTH || (prototype !== Object.prototype && prototype !== Array.prototype && prototype !== null)) {
    walk.bounded = false; // a Date, a class with toJSON, a cycle: serialized to know
    return;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    walk.bounded = false;
    return;
  }
  if (Array.isArray(value)) {
    const brackets = value.length === 0 ? 2 : value.length + 1;
    walk.maxBytes += brackets;
    walk.heapBytes += HEAP_HEADER + value.length * HEAP_SLOT;
    for (const item of value) leaf(walk, item, depth + 1);
    return;
  }
  let count = 0;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined) continue;
    count++;
    walk.maxBytes += key.length * 6 + 3;
    walk.heapBytes += key.length;
    leaf(walk, item, depth + 1);
  }
  const braces = count === 0 ? 2 : count + 1;
  walk.maxBytes += braces;
  walk.heapBytes += HEAP_HEADER + count * (HEAP_SLOT + HEAP_HEADER);
}

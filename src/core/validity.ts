/**
 * Whether a stored entry answers a queued item: fresh, newer than the entry a refresh replaces,
 * and on a tag-versioned store, carrying tags whose versions are still current; and the reads of
 * those versions (one store call each, made by the pipeline's read and lock steps).
 */
import type { Entry } from './freshness';
import type { Item, Source } from './item';
import type { Policy } from './options';
import type { Store } from './store';
import type { StoreCalls } from './store-calls';

/**
 * Whether a stored entry answers this item: fresh, and for a background refresh newer than the
 * entry it was started to replace (an early refresh must not stop at the still-fresh original).
 */
export function usable(
  item: Item,
  entry: Entry,
  now: number,
  current: ReadonlyMap<string, number> | undefined,
): boolean {
  return (
    now < entry.freshUntil &&
    (item.replaces === undefined || entry.freshUntil > item.replaces) &&
    tagsValid(item, entry, current)
  );
}

/**
 * On a tag-versioned store, an entry answers an item that names tags only if it carries the same
 * tags at the versions just read; anything else (invalidated since, written before tags were set)
 * is a miss. An entry carrying tags its item did not name answers only if the versions it
 * recorded are all current (`current`, see ownTagVersions).
 */
export function tagsValid(item: Item, entry: Entry, current: ReadonlyMap<string, number> | undefined): boolean {
  const versions = item.versions;
  if (versions === undefined) {
    const own = entry.tags;
    if (own === undefined || own.length === 0 || current === undefined) return true; // untagged, or a store that enforces tags itself
    const recorded = entry.tagVersions;
    if (recorded === undefined || recorded.length !== own.length) return false;
    for (let i = 0; i < own.length; i++) if (recorded[i] !== current.get(own[i]!)) return false;
    return true;
  }
  const tags = item.tags!;
  const entryTags = entry.tags;
  const entryVersions = entry.tagVersions;
  if (entryTags === undefined || entryVersions === undefined || entryTags.length !== tags.length) return false;
  for (let i = 0; i < tags.length; i++) {
    if (entryTags[i] !== tags[i] || entryVersions[i] !== versions[i]) return false;
  }
  return true;
}

/** Tag → version as read for the items that name tags (their versions are aligned with their tags). */
export function knownVersions(items: readonly Item[]): Map<string, number> {
  const known = new Map<string, number>();
  for (const item of items) {
    const { tags, versions } = item;
    if (tags !== undefined && versions !== undefined)
      for (let i = 0; i < tags.length; i++) known.set(tags[i]!, versions[i]!);
  }
  return known;
}

/**
 * Sets each tagged item's `versions` (read before any fill: a fill records them, so an
 * invalidation landing during the fill makes its write a miss); NaN where unknown (the store
 * failed): never valid, never written.
 */
export async function readTagVersions(store: Store, calls: StoreCalls, items: Item[]): Promise<void> {
  const unique = [...new Set(items.flatMap((item) => item.tags ?? []))];
  const versions = await calls.call('tagVersions', () => store.tagVersions!(unique), items);
  const byTag = new Map<string, number>();
  if (versions !== undefined) for (let i = 0; i < unique.length; i++) byTag.set(unique[i]!, versions[i]!);
  for (const item of items) if (item.tags !== undefined) item.versions = item.tags.map((tag) => byTag.get(tag) ?? NaN);
}

/**
 * Validity follows the entry, not the caller: an entry that records tags is a miss once any of
 * them was invalidated, whether or not this load names them. Items that name tags are judged
 * against the versions read with the entries (readTagVersions); for entries carrying tags
 * their item did not name, the current versions of those tags are read here (one call, only
 * when there are such entries). Returns tag → current version (NaN: unknown, never valid), or
 * undefined when no entry needs it (or the store enforces tags itself).
 */
export function ownTagVersions(
  store: Store,
  calls: StoreCalls,
  items: readonly Item[],
  entries: readonly (Entry | undefined)[],
): Map<string, number> | Promise<Map<string, number>> | undefined {
  if (store.tagVersions === undefined) return undefined;
  let current: Map<string, number> | undefined;
  let missing: Set<string> | undefined;
  for (let i = 0; i < items.length; i++) {
    const tags = entries[i]?.tags;
    const item = items[i]!;
    if (tags === undefined || tags.length === 0 || item.versions !== undefined) continue;
    current ??= knownVersions(items);
    for (const tag of tags) if (!current.has(tag)) (missing ??= new Set()).add(tag);
  }
  if (missing === undefined) return current;
  const tags = [...missing];
  const known = current!;
  return calls
    .call('tagVersions', () => store.tagVersions!(tags), items)
    .then((versions) => {
      for (let i = 0; i < tags.length; i++) known.set(tags[i]!, versions?.[i] ?? NaN);
      return known;
    });
}

/** The tags of the value of `arg`: a getOrCompute call's own, or the loader's `tags(key)`. */
export function tagsFor(source: Source, arg: unknown, policy: Policy): readonly string[] | undefined {
  return nonEmpty(policy.tags ?? source.tagsOf?.(arg));
}

/** What tagsFor threw (a loader's `tags` function): the load fails with it. */
export class TagsFailed {
  constructor(readonly error: unknown) {}
}

/** tagsFor, its throw returned as a TagsFailed (the load path rejects the load with it). */
export function tagsOrFailed(source: Source, arg: unknown, policy: Policy): readonly string[] | undefined | TagsFailed {
  try {
    return tagsFor(source, arg, policy);
  } catch (error) {
    return new TagsFailed(error);
  }
}

/** An empty tag list is no tags: nothing to version, nothing to invalidate by. */
export function nonEmpty(tags: readonly string[] | undefined): readonly string[] | undefined {
  return tags !== undefined && tags.length > 0 ? tags : undefined;
}

/**
 * Whether a stored entry answers a queued item: fresh, newer than the entry a refresh replaces,
 * and on a tag-versioned store, carrying tags whose versions are still current.
 */
import type { Entry } from './freshness';
import type { Item } from './pipeline';

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
 * recorded are all current (`current`, see #ownTagVersions).
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

/**
 * Tag versions on Redis: how long an invalidation is remembered, and how long a tagged entry may
 * live so that forgetting an invalidation never brings back what it invalidated.
 *
 * A tag T's version is the integer at `prefixtag:{T}`, bumped by invalidateTags and recorded by
 * every fill of a T-tagged value (read before the fill). An entry whose recorded version is not
 * current is a miss. Versions come from the server's clock (microseconds): a read that finds no
 * key makes one at the server's time (kept tagTtl), and a bump sets one above both the version
 * and the server's time (kept 2 × tagTtl). So a key that is lost (expired, evicted, its Cluster
 * master restarted empty, a failover that lost it) is made again at a later time, a version no
 * entry recorded: its entries are misses. (Versions used to count from a missing key read as 0:
 * a lost key brought back every entry filled before the tag's first invalidation, and every one
 * that recorded a count the restarted counter came back to.) An entry must still not outlive the
 * bump that fences it while the key lives. Hence: tagged entries are kept at most `tagTtl`, and a
 * version key lives `2 × tagTtl` after its bump.
 *
 * Why both bounds. Take an entry E of tag T that recorded version v (read at time r, before its
 * fill) and was written at w, and the last bump of T at b; T's key lives until b + 2·tagTtl.
 * - E written before the bump (w < b): E is gone by w + tagTtl < b + 2·tagTtl. While the key lives
 *   its version is above v, so E is a miss; by the time the key resets, E has expired.
 * - E written after the bump by a fill that read v before it (r < b < w), the very race tags exist
 *   to win: E is a miss while the key lives, and expires by w + tagTtl. Had the key lived only tagTtl
 *   after the bump, E could outlive it by (w - b) and read as valid again once the version reset to
 *   0 (when v = 0: T's first invalidation). With 2·tagTtl, E expires first unless its fill spent more
 *   than tagTtl between reading the versions and writing (a locked fill's write is fenced by lockTtl,
 *   far below the 7 days of the default).
 * - E that read the bumped version (r > b) is simply valid: it was filled after the bump.
 * (With versions from the server's clock, a key made again is a version E never recorded: these
 * bounds matter again only if that clock went back by more than the key's absence.)
 * The tag clock's keys (tag-clock.ts: the clock, and each tag's reading beside its version) are
 * given the version key's expiry at every bump; a reading gone with its version key fences nothing
 * any more (its fills' writes are fenced by their lock, far sooner).
 */
import type { StoreWrite } from '../core/store';

export const TAG_TTL_DEFAULT = 7 * 24 * 60 * 60 * 1000;

/** Milliseconds a version key is kept after the tag's last invalidation. */
export function versionKeyTtl(tagTtl: number): number {
  return 2 * tagTtl;
}

/** Milliseconds the store keeps a write (Infinity: no expiry): a tagged entry at most tagTtl. */
export function keptFor(write: StoreWrite, tagTtl: number): number {
  const tags = write.entry.tags;
  return tags !== undefined && tags.length > 0 ? Math.min(write.ttl, tagTtl) : write.ttl;
}

/** A version as the scripts store it; anything else is not ours: NaN ("unknown": never valid, never cached). */
export function readVersion(raw: string | null | undefined): number {
  if (raw === null || raw === undefined) return 0;
  const version = Number(raw);
  return Number.isSafeInteger(version) && version >= 0 ? version : NaN;
}

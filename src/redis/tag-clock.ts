/**
 * The Redis store's tags: their versions (tags.ts), and the fleet's tag clock, which lets a fill
 * whose tags are known only when it ends (late tags: a whole GraphQL response, core/late-tags.ts)
 * tell whether one of them was invalidated by any replica while it ran.
 *
 * The gap it closes. A tagged entry records its tags' versions and is a miss once one moves. A fill
 * whose tags are known before it reads their versions before it starts, so an invalidation landing
 * during the fill moves them past what the entry records. Late tags' versions can only be read at
 * the fill's end: an invalidation made meanwhile by another replica (which this process does not
 * hear of) is already counted in them, and a value computed from data older than it would be
 * stored as current.
 *
 * The clock. One key per prefix, `prefixtag:clock`. Every invalidateTags takes a reading from it,
 * above the clock's previous reading and above the server's time in microseconds (TAG_BUMP, in
 * tag-scripts.ts), and leaves that reading beside each tag's version, at `prefixtag:{T}:seq` (the latest
 * reading the tag was given). A late-tagged fill reads the clock before it starts (tagClock: the
 * clock's last reading or the server's time, whichever is later; read alongside the lock call that
 * precedes the fill, so it costs no round trip of its own), and at its end reads its late tags'
 * versions together with their readings (tagVersionsSince: one script call per slot, version and reading
 * share the tag's slot). A tag whose reading is above the fill's was invalidated after the fill
 * started: its version reads NaN, "unknown", and the value is served but not stored.
 *
 * Why it holds. The invalidation of a change comes after the change is written, and the data a fill
 * reads is read after the fill read the clock. So a fill that read data older than the change read
 * the clock before the invalidation took its reading, which is therefore above the fill's. Its end
 * read of a tag runs either before the tag's bump (it records the old version: a miss once bumped)
 * or after it (it sees the reading: not stored).
 * - One Redis, or Sentinel: the reading and the bumps are one script, the clock read another, on
 *   one server: totally ordered.
 * - Cluster: the clock is one key, on one master; the tags are in other slots, and a script may only
 *   touch its own slot. The bump takes the reading first (one call on the clock's master) and then
 *   bumps the tags per slot with it: the ordering argument above needs no more.
 *
 * Limits.
 * - The clock's master unreachable (Cluster): bumps use their own node's time as the reading, which
 *   holds up to the clock skew between masters; late-tagged fills cannot read the clock and are
 *   served, not stored, until it is back.
 * - A failover that loses the clock's last writes: readings continue from the new master's time, so
 *   this holds unless its clock is behind the old master's by more than the failover took.
 * - Processes of earlier versions (a rolling deploy) bump versions without a reading: a late-tagged
 *   fill does not see their invalidations (the gap as before), and their late-tagged fills read
 *   versions at the end (as before). Entries, version keys and versions are unchanged: every version
 *   reads every other's entries, and bumps from either invalidate them.
 */
import { readVersion, versionKeyTtl } from './tags';
import { pick, TAG_SEQUENCE_SUFFIX, tagClockKey } from './keys';
import type { RedisLink } from './link';
import type { LockScripts } from './scripts';

/** The assembled result of a call whose replies say nothing beyond success. */
function none(): void {}

export class RedisTags {
  readonly #link: RedisLink;
  readonly #scripts: LockScripts;
  readonly #clockKey: string;

  constructor(link: RedisLink, scripts: LockScripts) {
    this.#link = link;
    this.#scripts = scripts;
    this.#clockKey = tagClockKey(link.prefix);
  }

  /**
   * The current version of each tag: one script call (in a Cluster, one per hash slot, in
   * parallel). A missing key is made (TAG_READ: a lost key never reads as a version entries
   * recorded); a key that is not an integer (not ours) is NaN, which the registry treats as
   * "unknown": the value is served but not cached.
   */
  versions(tags: readonly string[]): Promise<number[]> {
    return this.#read(tags, undefined);
  }

  /** As versions, except that a tag invalidated after the clock read `since` (or unknown) is NaN. */
  versionsSince(tags: readonly string[], since: number): Promise<number[]> {
    return this.#read(tags, since);
  }

  /** The clock's reading now (TAG_CLOCK): every later invalidation's reading is above it. */
  clock(): Promise<number> {
    const link = this.#link;
    const key = this.#clockKey;
    const scripts = this.#scripts;
    return link.call(
      'tagClock',
      [key],
      link.slotGroups([key]),
      () => scripts.herdcacheTagClock1(1, key),
      (replies) => reading(replies[0]),
    );
  }

  /**
   * Bumps each tag's version and gives it the clock's next reading: on one Redis one script call;
   * in a Cluster the reading first (the clock's master), then one call per hash slot, in parallel.
   * Every entry recorded with an older version is a miss from the moment its slot's call has run,
   * on every replica. No scan, no delete of entries: they expire on their own.
   */
  async invalidate(tags: readonly string[]): Promise<void> {
    const link = this.#link;
    const keys = link.tagKeys(tags);
    const scripts = this.#scripts;
    const keep = String(versionKeyTtl(link.tagTtl));
    const clockKey = this.#clockKey;
    if (!link.cluster) {
      const all = withSequenceKeys(keys, null, clockKey);
      await link.call('invalidateTags', keys, null, () => scripts.herdcacheTagBump3(all.length, all, keep, ''), none);
      return;
    }
    let taken = 'now';
    try {
      const bumped = await link.call(
        'invalidateTags',
        [clockKey],
        link.slotGroups([clockKey]),
        () => scripts.herdcacheTagBump3(1, clockKey, keep, ''),
        (replies) => reading(replies[0]?.[0]),
      );
      if (!Number.isNaN(bumped)) taken = String(bumped);
    } catch {
      // The clock's master is unreachable (its breaker counts it): the tags must still be bumped,
      // with their own node's time as the reading (see Limits above).
    }
    await link.call(
      'invalidateTags',
      keys,
      link.slotGroups(keys),
      (indices) => {
        const pairs = withSequenceKeys(keys, indices, undefined);
        return scripts.herdcacheTagBump3(pairs.length, pairs, keep, taken);
      },
      none,
    );
  }

  async #read(tags: readonly string[], since: number | undefined): Promise<number[]> {
    const n = tags.length;
    if (n === 0) return [];
    const link = this.#link;
    const keys = link.tagKeys(tags);
    const groups = link.slotGroups(keys);
    const scripts = this.#scripts;
    const made = String(link.tagTtl);
    const mode = since === undefined ? '' : 'since';
    const send = (indices: number[] | null) => {
      const sent =
        since === undefined
          ? indices === null
            ? keys
            : pick(keys, indices)
          : withSequenceKeys(keys, indices, undefined);
      return scripts.herdcacheTagRead1(sent.length, sent, made, mode); // an array: a spread of 150k keys overflows the stack
    };
    // A failed group's versions are NaN: unknown, so its tagged values are served, not cached.
    return link.call('tagVersions', keys, groups, send, (replies) => {
      const out = new Array<number>(n).fill(NaN);
      const step = since === undefined ? 1 : 2;
      for (let g = 0; g < replies.length; g++) {
        const reply = replies[g];
        if (reply === undefined) continue;
        const indices = groups === null ? null : groups[g]!;
        for (let j = 0; step * j < reply.length; j++) {
          const i = indices === null ? j : indices[j]!;
          if (since !== undefined && !(readVersion(reply[2 * j + 1]) <= since)) continue; // invalidated since, or unknown
          out[i] = readVersion(reply[step * j]);
        }
      }
      return out;
    });
  }
}

/** Each version key followed by its sequence key (same slot), after `clockKey` when given. */
function withSequenceKeys(keys: readonly string[], indices: readonly number[] | null, clockKey: string | undefined) {
  const count = indices === null ? keys.length : indices.length;
  const first = clockKey === undefined ? 0 : 1;
  const out = new Array<string>(first + 2 * count);
  if (clockKey !== undefined) out[0] = clockKey;
  for (let j = 0; j < count; j++) {
    const key = keys[indices === null ? j : indices[j]!]!;
    out[first + 2 * j] = key;
    out[first + 2 * j + 1] = key + TAG_SEQUENCE_SUFFIX;
  }
  return out;
}

/** A reading as the scripts return it (an integer); anything else is NaN: unknown. */
function reading(reply: unknown): number {
  const value = typeof reply === 'string' ? Number(reply) : reply;
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : NaN;
}

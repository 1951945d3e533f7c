/**
 * Invalidations the store failed to take (Redis stalled, its breaker open), until a retry of
 * ./invalidation has sent them. While one is here this replica reads no entry it covers (its key,
 * one of its tags, any after a failed clear): the store has not taken the invalidation yet, and a
 * read of this replica after the write that invalidated must not find what the write made stale
 * (Redis answering again before the retry). Other replicas cannot know: the retry is sent as soon
 * as a store call succeeds again (StoreCalls.succeeded), not at its backoff's end.
 *
 * Each invalidation keeps a sequence number: a retry that succeeds removes what it sent, not an
 * invalidation of the same key or tag that failed again while it was sending.
 */
import type { Entry } from './freshness';

/**
 * The first retry's delay (ms) of an invalidation the store failed to take (./invalidation); it
 * doubles while the store still fails, up to RETRY_MAX_MS: a replica that makes no other store
 * call (a mutation worker) learns that the store answers again by its retry only. A retry against
 * a store whose breaker is open fails without a round trip.
 */
export const RETRY_FIRST_MS = 250;
export const RETRY_MAX_MS = 1_000;

export class UnsentInvalidations {
  /** Key → [the latest time it was invalidated at, its sequence number]. */
  readonly keys = new Map<string, readonly [at: number, seq: number]>();
  /** Tag → its sequence number. */
  readonly tags = new Map<string, number>();
  /** A clear's sequence number, 0 for none. */
  clear = 0;
  /** Whether anything is unsent: the read path's only cost when nothing is (a field, not a getter). */
  any = false;
  #seq = 0;

  /**
   * Adds invalidations the store failed to take. Bounded by `max` keys and `max` tags: past that
   * the oldest go, and a clear is kept in their place (sent as clear() once the store answers,
   * read as one meanwhile: nothing is read here), so no invalidation is lost without trace, on
   * this replica or in the store.
   */
  add(keys: readonly string[], at: number, tags: readonly string[], clear: boolean, max: number): void {
    const seq = ++this.#seq;
    const pendingKeys = this.keys;
    for (const key of keys) {
      const before = pendingKeys.get(key);
      pendingKeys.delete(key); // re-inserted last: the newest
      pendingKeys.set(key, [Math.max(at, before?.[0] ?? -Infinity), seq]);
    }
    const pendingTags = this.tags;
    for (const tag of tags) {
      pendingTags.delete(tag);
      pendingTags.set(tag, seq);
    }
    if (pendingKeys.size > max || pendingTags.size > max) {
      clear = true;
      while (pendingKeys.size > max) pendingKeys.delete(pendingKeys.keys().next().value!);
      while (pendingTags.size > max) pendingTags.delete(pendingTags.keys().next().value!);
    }
    if (clear) this.clear = seq;
    this.any = true;
  }

  /** What a retry sends now: every key with the latest time, the tags, the clear; taken() later removes them. */
  snapshot(): UnsentSnapshot {
    let at = -Infinity;
    for (const [time] of this.keys.values()) if (time > at) at = time;
    return { keys: new Map(this.keys), at, tags: new Map(this.tags), clear: this.clear };
  }

  /**
   * Removes what the store took of a snapshot (unless invalidated again since: a newer sequence
   * number). `tags`: taken or not, or the set of those it did not take (a partial failure).
   */
  taken(sent: UnsentSnapshot, keys: boolean, tags: boolean | ReadonlySet<string>, clear: boolean): void {
    if (keys) for (const [key, [, seq]] of sent.keys) if (this.keys.get(key)?.[1] === seq) this.keys.delete(key);
    if (tags !== false)
      for (const [tag, seq] of sent.tags)
        if (this.tags.get(tag) === seq && (tags === true || !tags.has(tag))) this.tags.delete(tag);
    if (clear && this.clear === sent.clear) this.clear = 0;
    this.any = this.clear !== 0 || this.keys.size > 0 || this.tags.size > 0;
  }

  /** The sequence number the next invalidation added will be above: read before a store call (see retire). */
  get seq(): number {
    return this.#seq;
  }

  /**
   * An invalidation the store took, issued after those numbered up to `before`: it covers what
   * they would (the same keys, the same tags; a clear, everything), so they need no retry and no
   * longer keep entries from being read. One added since it was issued is kept.
   */
  retire(keys: readonly string[], tags: readonly string[], all: boolean, before: number): void {
    if (!this.any) return;
    if (all) {
      for (const [key, [, seq]] of this.keys) if (seq <= before) this.keys.delete(key);
      for (const [tag, seq] of this.tags) if (seq <= before) this.tags.delete(tag);
      if (this.clear <= before) this.clear = 0;
    } else {
      for (const key of keys) if ((this.keys.get(key)?.[1] ?? Infinity) <= before) this.keys.delete(key);
      for (const tag of tags) if ((this.tags.get(tag) ?? Infinity) <= before) this.tags.delete(tag);
    }
    this.any = this.clear !== 0 || this.keys.size > 0 || this.tags.size > 0;
  }

  /** Whether a read of `key` that found `entry` must not use it. */
  covers(key: string, entry: Entry): boolean {
    if (this.clear !== 0 || this.keys.has(key)) return true;
    const own = entry.tags;
    if (own === undefined || this.tags.size === 0) return false;
    for (const tag of own) if (this.tags.has(tag)) return true;
    return false;
  }

  /** Drops everything (the cache is closed). */
  drop(): void {
    this.keys.clear();
    this.tags.clear();
    this.clear = 0;
    this.any = false;
  }
}

export interface UnsentSnapshot {
  readonly keys: ReadonlyMap<string, readonly [at: number, seq: number]>;
  /** The latest time any of the keys was invalidated at. */
  readonly at: number;
  readonly tags: ReadonlyMap<string, number>;
  readonly clear: number;
}

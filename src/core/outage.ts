/**
 * What this process filled while the store could not take it (Redis down, stalled, its breaker
 * open): kept for a moment, and read when the store cannot be read. Without it, while the store is
 * away every load of a key fills (nothing is kept in process), not once per replica: a review of
 * the packed package measured 19–42× the steady fill rate during an outage, and 3–4× in the first
 * second after Redis answered again (the ~100 ms before the client is ready). With it, a key is
 * filled once per OUTAGE_HOLD_MS at most per process while the store is away.
 *
 * Consulted only when a read failed as a whole (never for a miss the store answered: another
 * replica may have invalidated the key there), each entry for at most OUTAGE_HOLD_MS and never past
 * its own freshness. Dropped by a local invalidation (key, tag, clear) and by a later write the
 * store took. Bounded: OUTAGE_MAX_ENTRIES, oldest first.
 */
import type { Entry } from './freshness';
import type { StoreWrite } from './store';

/** The longest an entry the store failed to take is read from here (ms). */
export const OUTAGE_HOLD_MS = 1_000;
/** The most entries kept (the oldest go first). */
export const OUTAGE_MAX_ENTRIES = 1_000;

interface Held {
  readonly entry: Entry;
  readonly until: number;
}

export class OutageMemo {
  /** Insertion order is time order: the oldest (first to expire) first. */
  readonly #held = new Map<string, Held>();
  /** Invalidations so far: a write issued before one is not kept when its failure is known after it. */
  #invalidations = 0;

  get size(): number {
    return this.#held.size;
  }

  /** Read when a write is issued, and given back to keep() when it failed (see keep). */
  get invalidations(): number {
    return this.#invalidations;
  }

  /**
   * Keeps the entries of writes the store failed to take, written at `now`, unless an invalidation
   * came between the write's issue (`issued`: `invalidations` then) and its failure: the entries
   * may be what it invalidated.
   */
  keep(writes: readonly StoreWrite[], now: number, issued: number): void {
    if (issued !== this.#invalidations) return;
    const held = this.#held;
    for (const { key, entry } of writes) {
      held.delete(key); // re-inserted last: the newest
      const until = Math.min(entry.freshUntil, now + OUTAGE_HOLD_MS);
      if (until > now) held.set(key, { entry, until });
    }
    for (const [key, { until }] of held) {
      if (held.size <= OUTAGE_MAX_ENTRIES && until > now) break;
      held.delete(key);
    }
  }

  /** The entries held for `keys` (undefined: none, or past its hold), for a read the store failed. */
  read(keys: readonly string[], now: number): (Entry | undefined)[] {
    const held = this.#held;
    return keys.map((key) => {
      const found = held.get(key);
      if (found === undefined) return undefined;
      if (found.until > now) return found.entry;
      held.delete(key);
      return undefined;
    });
  }

  /** An invalidation: forgets `keys`, the entries carrying one of `tags`, or all (and any write failing after it). */
  invalidate(keys: readonly string[], tags: readonly string[], all: boolean): void {
    this.#invalidations++;
    this.drop(keys, tags, all);
  }

  /** Forgets `keys` (written since), entries carrying one of `tags`, or all. */
  drop(keys: readonly string[], tags: readonly string[], all: boolean): void {
    const held = this.#held;
    if (held.size === 0) return;
    if (all) {
      held.clear();
      return;
    }
    for (const key of keys) held.delete(key);
    if (tags.length === 0) return;
    const dropped = new Set(tags);
    for (const [key, { entry }] of held) if (entry.tags?.some((tag) => dropped.has(tag))) held.delete(key);
  }
}

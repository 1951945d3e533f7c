/**
 * Values whose tags are known only once they are computed: a whole GraphQL response is tagged
 * with the entities it turned out to contain. A fill returns `new LateTagged(value, tags)`; the
 * registry serves `value` and stores it with `tags`.
 *
 * The race tags exist to win (an invalidation landing while the value is computed) is won
 * differently than for tags known before the fill, whose versions are read before it:
 * - in this process (and on a store that hears other replicas' invalidations), a flight of a
 *   late-tagged policy is abandoned by any tag invalidation before its fill runs (a read under way
 *   may predate it); while its fill runs, the invalidated tags are noted, and when it ends with its
 *   tags, the fill asks (internal invalidatedLate) whether one of them was: then the flight is
 *   abandoned, its result not written and its waiters start over. Invalidations of other tags
 *   leave it be (a steady stream of unrelated writes would otherwise abandon every response).
 * - on a tag-versioned store, the late tags' versions are read when the fill ends. An
 *   invalidation made by another replica during the fill, which this process does not hear of,
 *   is already counted in them. A store with a tag clock (Store.tagClock, redisStore) tells it
 *   apart: the clock is read before the fill (alongside the read or lock call that precedes it, or
 *   on its own just before), and the late tags' versions at its end with tagVersionsSince, which
 *   reads NaN for a tag invalidated after that reading: the value is served, not stored (to its
 *   callers, or `ifInvalidated` instead: they may have joined after that invalidation). A store
 *   without one keeps the window, one fill long (docs/response-cache.md).
 *
 * Internal: the response layer (herdcache/graphql) is its one user.
 */
import type { Item } from './item';
import type { Policy } from './options';
import type { Store } from './store';
import type { StoreCalls } from './store-calls';
export class LateTagged<V = unknown> {
  constructor(
    readonly value: V,
    readonly tags: readonly string[],
    /** The fill vouches that `tags` holds each tag once: the registry does not dedupe them again. */
    readonly distinct = false,
    /** The value's estimated bytes by core/sizes' rules, when the fill measured them (Entry.valueBytes). */
    readonly valueBytes?: number,
  ) {}

  /**
   * Set by the registry when it served the value without storing it because a late tag's version
   * could not be vouched for: 'invalidated' (a tag invalidated elsewhere while it was computed),
   * 'unavailable' (the versions or the tag clock could not be read: the store failed); 'oversized'
   * (larger than the store keeps: Store.keeps), served to the fill's waiters as it is.
   */
  refused: false | 'invalidated' | 'unavailable' | 'oversized' = false;

  /**
   * What the fill's callers get instead of `value` when the registry refuses it as 'invalidated'
   * (they may have come after that invalidation); undefined: `value`.
   */
  ifInvalidated: { readonly value: unknown } | undefined = undefined;

  /** Served to the fill's waiters, never written (a response too large to store): see served(). */
  servedOnly = false;

  /**
   * Served only, to the fill's own caller alone (nobody waited on it; one that joins as it ends
   * starts over): no invalidation made while it ran abandons it, though its tags are not known.
   */
  unfenced = false;

  /**
   * How long the value stays fresh when written (ms), when shorter than its policy's ttl (a
   * response built from a field served stale: fresh briefly, its grace kept). Undefined: the ttl.
   */
  freshMs: number | undefined = undefined;

  /**
   * A value the registry hands to everyone waiting on the fill without writing it (the lock is
   * released). `tags`: its tags when known (a response too large to store): an invalidation of one
   * of them while it ran (elsewhere, by the tag clock) hands its waiters `ifInvalidated` instead.
   */
  static served<V>(value: V, tags: readonly string[] = []): LateTagged<V> {
    const tagged = new LateTagged(value, tags);
    tagged.servedOnly = true;
    return tagged;
  }
}

/** Whether the store tells a late-tagged fill of the invalidations made while it ran. */
export function hasTagClock(store: Store): boolean {
  return store.tagClock !== undefined && store.tagVersionsSince !== undefined;
}

/** Whether this item's fill should read the tag clock first: late-tagged, not read yet. */
export function needsClock(item: Item): boolean {
  return item.policy.lateTags === true && item.clock === undefined;
}

/**
 * Reads the store's tag clock for the late-tagged items among `items` that have none (NaN when the
 * read fails: their values are served, not stored). Undefined when none needs it: no call.
 */
export function readClock(store: Store, calls: StoreCalls, items: readonly Item[]): Promise<void> | undefined {
  if (!hasTagClock(store)) return undefined;
  let clocked: Item[] | undefined;
  for (const item of items) if (needsClock(item)) (clocked ??= []).push(item);
  if (clocked === undefined) return undefined;
  const those = clocked;
  return calls
    .call('tagClock', () => store.tagClock!(), those)
    .then((clock) => {
      for (const item of those) item.clock ??= clock ?? NaN;
    });
}

/**
 * The policy a LateTagged value is written with: fresh for its `freshMs` when shorter than the
 * ttl (a response built from a field served stale), its grace kept, no jitter.
 */
export function freshPolicy<P extends Policy>(policy: P, freshMs: number | undefined): P {
  return freshMs !== undefined && freshMs < (policy.ttl ?? Infinity) ? { ...policy, ttl: freshMs, jitter: 0 } : policy;
}

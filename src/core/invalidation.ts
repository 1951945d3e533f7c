/**
 * What makes values out of date, for the registry (Cache): an invalidation of keys or tags, a
 * clear, a prime (a write that supersedes the fill of its key), and the same news from another
 * replica. Each abandons the fills in flight it makes stale (their results are not written; their
 * waiters start over), counts, then tells the store through StoreCalls (a failing store is counted,
 * never fails the call).
 */
import { HerdcacheError } from './errors';
import type { FlightTable } from './flight';
import { type Clock, makeEntry, physicalTtl } from './freshness';
import type { Source } from './item';
import { nonEmpty } from './validity';
import { boundedKey, boundedKeys } from './long-keys';
import type { CounterSet } from './metrics';
import { type Policy, checkTags, storesValues } from './options';
import type { Store } from './store';
import type { StoreCalls } from './store-calls';

export class Invalidation {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #flights: FlightTable;
  readonly #counters: CounterSet;
  readonly #storeCalls: StoreCalls;

  constructor(store: Store, clock: Clock, flights: FlightTable, counters: CounterSet, storeCalls: StoreCalls) {
    this.#store = store;
    this.#clock = clock;
    this.#flights = flights;
    this.#counters = counters;
    this.#storeCalls = storeCalls;
  }

  /** Removes `keys` (validated) from the store, counted on `source`; `stored: false` touches no store. */
  async keys(keys: readonly string[], source: string, stored: boolean): Promise<void> {
    keys = boundedKeys(keys);
    this.abandon(keys, [], false, 'the key was invalidated while this fill ran');
    this.#counters.count(source, 'invalidations', keys.length);
    if (!stored) return; // a coalesce-only loader's keys are never in the store
    // The time lets a store refuse the unlocked writes of fills that started before this.
    const at = this.#clock.now();
    await this.#storeCalls.call('delete', () => this.#store.delete(keys, { at }));
  }

  /** Makes every entry carrying one of `tags` (validated here) a miss, counted on `source`. */
  async tags(tags: readonly string[], source: string): Promise<void> {
    this.checkTags('tags', tags);
    if (tags.length === 0) return;
    this.abandon([], tags, false, 'a tag of this value was invalidated while it was filled');
    this.#counters.count(source, 'invalidations', tags.length);
    await this.#storeCalls.call('invalidateTags', () => this.#store.invalidateTags!(tags));
  }

  /** Refuses option `option` (tags) when the store cannot invalidate tags. */
  checkTagsSupported(option: string): void {
    if (this.#store.invalidateTags === undefined) {
      throw new HerdcacheError(
        'E_UNSUPPORTED',
        `herdcache: option "${option}" needs a store with invalidateTags (memoryStore, redisStore, tieredStore); "${this.#store.name}" has none`,
      );
    }
  }

  /** The tags of option `name`, validated, on a store that can invalidate them. */
  checkTags(name: string, tags: unknown): readonly string[] {
    this.checkTagsSupported(name);
    return checkTags(name, tags);
  }

  /** Writes a value into the shared store now, with its tags (loader.prime). */
  async prime(
    source: Source,
    key: string,
    value: unknown,
    policy: Policy,
    tags: readonly string[] | undefined,
  ): Promise<void> {
    if (value === undefined || !storesValues(policy)) return; // coalesce-only: nothing is ever stored
    key = boundedKey(key);
    // A fill of this key already in flight computed from older data: it must not write over this.
    this.abandon([key], [], false, 'the key was primed while this fill ran');
    tags = nonEmpty(tags);
    let tagVersions: number[] | undefined;
    if (tags !== undefined && this.#store.tagVersions !== undefined) {
      // As a fill does: the versions current now, so a later invalidateTags makes this a miss.
      tagVersions = await this.#storeCalls.call('tagVersions', () => this.#store.tagVersions!(tags), source);
      if (tagVersions === undefined || tagVersions.some(Number.isNaN)) return; // unknown versions: not cached
    }
    const now = this.#clock.now();
    const entry = makeEntry(value, now, policy, { tags, tagVersions });
    // Fenced as an invalidation is: a fill of this key on another replica that started before
    // this holds its lock or wrote nothing yet; the delete takes the lock and marks the key, so
    // its write is refused rather than landing over this value (a plain write would not be).
    await this.#storeCalls.call('delete', () => this.#store.delete([key], { at: now }), source);
    await this.#storeCalls.call(
      'setMany',
      () => this.#store.setMany([{ key, entry, ttl: physicalTtl(entry, now) }]),
      source,
    );
  }

  /** Empties the store and abandons every fill in flight. */
  async clear(): Promise<void> {
    this.abandon([], [], true, 'the cache was cleared while this fill ran');
    await this.#storeCalls.call('clear', () => this.#store.clear());
  }

  /** Abandons the fills in flight of `keys`, of values carrying `tags`, or all of them. */
  abandon(keys: readonly string[], tags: readonly string[], all: boolean, why: string): void {
    const reason = new HerdcacheError('E_INVALIDATED', `herdcache: ${why}`);
    if (all) {
      this.#flights.abandonAll(reason);
      return;
    }
    for (const key of keys) {
      const flight = this.#flights.get(key);
      if (flight !== undefined) this.#flights.abandon(flight, reason);
    }
    if (tags.length > 0) this.#flights.abandonTagged(new Set(tags), reason);
  }
}

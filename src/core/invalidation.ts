/**
 * What makes values out of date, for the registry (Cache): an invalidation of keys or tags, a
 * clear, a prime (a write that supersedes the fill of its key), and the same news from another
 * replica. Each abandons the fills in flight it makes stale (their results are not written; their
 * waiters start over), counts, then tells the store through StoreCalls (a failing store is counted,
 * never fails the call). An invalidation the store failed to take (Redis stalled, breaker open) is
 * kept and sent again until the store takes it (Retries), so a value it made stale does not stay
 * for its whole ttl on every replica.
 */
import { HerdcacheError, isError, isThenable } from './errors';
import type { FlightTable } from './flight-table';
import { type Clock, makeEntry, physicalTtl } from './freshness';
import { flightsStarted } from './flight';
import type { Source } from './item';
import { nonEmpty } from './validity';
import { boundedKey, boundedKeys } from './long-keys';
import type { CounterSet } from './metrics';
import { type Policy, checkTags, storesValues } from './options';
import type { Store } from './store';
import type { StoreCalls } from './store-calls';
import { RETRY_FIRST_MS, RETRY_MAX_MS, type UnsentInvalidations } from './unsent';
import type { PrimeInFlight } from './prime-in-flight';

/** Invalidations kept for a retry at most, keys and tags each (beyond, the oldest are replaced by a clear: ./unsent). */
export const MAX_PENDING_INVALIDATIONS = 10_000;
const RESENT = 'an invalidation was sent again while this fill ran';

export class Invalidation {
  readonly #store: Store;
  /** What the store failed to take, until a retry sends it: read by the read path (./unsent). */
  readonly #unsent: UnsentInvalidations;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** When the scheduled retry fires (Date.now() time, as setTimeout's). */
  #retryAt = 0;
  #retryDelay = RETRY_FIRST_MS;
  /** When the last retry was sent (Date.now()): a store answering again brings the next forward, not closer than RETRY_FIRST_MS. */
  #lastSent = -Infinity;
  #sending = false;
  #closed = false;
  readonly #clock: Clock;
  readonly #flights: FlightTable;
  readonly #counters: CounterSet;
  readonly #storeCalls: StoreCalls;
  /** Primes awaiting their write (see PrimeInFlight); mostly empty. */
  readonly #primes = new Set<PrimeInFlight>();

  constructor(store: Store, clock: Clock, flights: FlightTable, counters: CounterSet, storeCalls: StoreCalls) {
    this.#store = store;
    this.#clock = clock;
    this.#flights = flights;
    this.#counters = counters;
    this.#storeCalls = storeCalls;
    this.#unsent = storeCalls.unsent;
    storeCalls.succeeded = () => this.#storeAnswers();
  }

  /** Removes `keys` (validated) from the store, counted on `source`; `stored: false` touches no store. */
  async keys(keys: readonly string[], source: string, stored: boolean): Promise<void> {
    keys = boundedKeys(keys);
    const why = 'the key was invalidated while this fill ran';
    const since = flightsStarted();
    this.abandon(keys, [], false, why);
    this.#counters.count(source, 'invalidations', keys.length);
    if (!stored) return; // a coalesce-only loader's keys are never in the store
    // The time lets a store refuse the unlocked writes of fills that started before this.
    const at = this.#clock.now();
    const before = this.#unsent.seq;
    const deleted = await this.#delete(keys, at);
    this.#sweep(keys, [], false, since, why);
    if (deleted) this.#unsent.retire(keys, [], false, before);
    else this.#keep(keys, at, [], false);
  }

  /** Makes every entry carrying one of `tags` (validated here) a miss, counted on `source`. */
  async tags(tags: readonly string[], source: string): Promise<void> {
    this.checkTags('tags', tags, true); // invalidateTags(tags): an argument
    if (tags.length === 0) return;
    const why = 'a tag of this value was invalidated while it was filled';
    const since = flightsStarted();
    this.abandon([], tags, false, why);
    this.#counters.count(source, 'invalidations', tags.length);
    const before = this.#unsent.seq;
    const bumped = await this.#bump(tags);
    this.#sweep([], tags, false, since, why);
    if (bumped === true) this.#unsent.retire([], tags, false, before);
    else if (bumped === false) this.#keep([], 0, tags, false);
    else {
      // Part taken (a Cluster master down: its slots' tags failed, the others were bumped): only
      // the rest goes again (bumping the others again would invalidate their entries again).
      this.#unsent.retire(
        [],
        tags.filter((tag) => !bumped.has(tag)),
        false,
        before,
      );
      this.#keep([], 0, [...bumped], false);
    }
  }

  /** Refuses option `option` (tags) when the store cannot invalidate tags. */
  checkTagsSupported(option: string): void {
    if (this.#store.invalidateTags === undefined) {
      throw new HerdcacheError(
        'E_UNSUPPORTED',
        `herdcache: ${option.startsWith('@') ? option : `option "${option}"`} needs a store with invalidateTags (memoryStore, redisStore, tieredStore); "${this.#store.name}" has none`,
      );
    }
  }

  /** The tags of option (or argument) `name`, validated, on a store that can invalidate them. */
  checkTags(name: string, tags: unknown, argument = false): readonly string[] {
    this.checkTagsSupported(name);
    return checkTags(name, tags, argument);
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
    // Earlier primes of the key past their value: their fence goes first (after this one's write
    // it would delete it). Taken before the abandon below supersedes them.
    let earlier: Promise<void>[] | undefined;
    for (const other of this.#primes) if (other.key === key && other.valueKnown) (earlier ??= []).push(other.done);
    // A fill of this key already in flight computed from older data: it must not write over this.
    const since = flightsStarted();
    this.abandon([key], [], false, 'the key was primed while this fill ran');
    tags = nonEmpty(tags);
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const prime: PrimeInFlight = { key, tags, superseded: false, valueKnown: !isThenable(value), done };
    this.#primes.add(prime);
    try {
      await this.#prime(source, prime, value, policy, earlier);
    } finally {
      this.#primes.delete(prime);
      finish();
      // A fill of the key that started meanwhile may have read the value this one replaces.
      this.#sweep([key], [], false, since, 'the key was primed while this fill ran');
    }
  }

  async #prime(
    source: Source,
    prime: PrimeInFlight,
    value: unknown,
    policy: Policy,
    earlier: Promise<void>[] | undefined,
  ): Promise<void> {
    const { key, tags } = prime;
    let writable = true;
    // A promise (loader.prime(key, promise)) primes what it resolves to, awaited as a prime in
    // flight: an invalidation or a later prime meanwhile supersedes it, and that one fences the
    // key (a later prime does even when its own promise fails). One that fails (rejects, or
    // resolves to nothing or an Error) writes nothing, but fences: the caller primed a change.
    if (isThenable(value)) {
      try {
        value = await value;
      } catch {
        value = undefined;
      }
      if (prime.superseded) return;
      if (value === undefined || isError(value)) writable = false;
      prime.valueKnown = true;
      // A fill of this key started while it was pending computed from older data too.
      const flight = this.#flights.get(key);
      if (flight !== undefined)
        this.#flights.abandon(
          flight,
          new HerdcacheError('E_INVALIDATED', 'herdcache: the key was primed while this fill ran'),
        );
    }
    if (earlier !== undefined) await Promise.all(earlier);
    let tagVersions: number[] | undefined;
    // As a fill does: the versions current now, so a later invalidateTags makes this a miss. Unknown
    // versions: nothing is written, but the key's older value must go all the same (the fence below).
    if (writable && tags !== undefined && this.#store.tagVersions !== undefined) {
      tagVersions = await this.#storeCalls.call('tagVersions', () => this.#store.tagVersions!(tags), source);
      writable = tagVersions !== undefined && !tagVersions.some(Number.isNaN);
    }
    const now = this.#clock.now();
    // Fenced as an invalidation is: a fill of this key on another replica that started before
    // this holds its lock or wrote nothing yet; the delete takes the lock and marks the key, so
    // its write is refused rather than landing over this value (a plain write would not be).
    // Either call failed (the store down): the key's older value must not stay for its ttl on
    // every replica, so the prime becomes an invalidation, kept and sent again as one.
    // Superseded meanwhile (a later prime, an invalidation): it still fences (a later prime writes
    // after this one is done), and writes nothing.
    const fenced = await this.#took('delete', () => this.#store.delete([key], { at: now }), source);
    let done = fenced;
    // Superseded while it awaited (an invalidation, a clear, a later prime): not written. The
    // invalidation removes the key itself; the fence above already removed the older value.
    if (fenced && writable && !prime.superseded) {
      const entry = makeEntry(value, now, policy, { tags, tagVersions });
      done = await this.#took(
        'setMany',
        () => this.#store.setMany([{ key, entry, ttl: physicalTtl(entry, now) }]),
        source,
      );
    }
    if (!done) this.#keep([key], now, [], false);
  }

  /** Empties the store and abandons every fill in flight. */
  async clear(): Promise<void> {
    const since = flightsStarted();
    this.abandon([], [], true, 'the cache was cleared while this fill ran');
    const before = this.#unsent.seq;
    const cleared = await this.#clear();
    this.#sweep([], [], true, since, 'the cache was cleared while this fill ran');
    if (cleared) this.#unsent.retire([], [], true, before);
    else this.#keep([], 0, [], true);
  }

  /**
   * One store call of an invalidation: whether the store took it (a failure is counted by
   * StoreCalls). A store method may return no promise: it is awaited all the same.
   */
  async #took(operation: string, work: () => unknown, source?: Source): Promise<boolean> {
    return (await this.#storeCalls.call(operation, async () => (await work(), true), source)) === true;
  }

  #delete(keys: readonly string[], at: number): Promise<boolean> {
    return this.#took('delete', () => this.#store.delete(keys, { at }));
  }

  /** The tags' bumps the store took: all (true), none (false), or all but these (a Cluster master down). */
  async #bump(tags: readonly string[]): Promise<boolean | ReadonlySet<string>> {
    const took = await this.#storeCalls.callParts(
      'invalidateTags',
      () => this.#store.invalidateTags!(tags),
      tags.length,
    );
    return typeof took === 'boolean' ? took : new Set(took.map((i) => tags[i]!));
  }

  #clear(): Promise<boolean> {
    return this.#took('clear', () => this.#store.clear());
  }

  /** Invalidations waiting for a retry (or being sent): keys, tags, and whether a clear is (tests, stats). */
  get pending(): { readonly keys: number; readonly tags: number; readonly clear: boolean } {
    const unsent = this.#unsent;
    return { keys: unsent.keys.size, tags: unsent.tags.size, clear: unsent.clear !== 0 };
  }

  /** Stops the retries (the cache is closed): what is still pending is dropped. */
  close(): void {
    this.#closed = true;
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
    this.#unsent.drop();
  }

  /** Keeps what the store failed to take, for a retry (bounded: past it, a clear: ./unsent), and schedules it. */
  #keep(keys: readonly string[], at: number, tags: readonly string[], clear: boolean): void {
    if (this.#closed) return;
    this.#unsent.add(keys, at, tags, clear, MAX_PENDING_INVALIDATIONS);
    this.#schedule(this.#retryDelay);
  }

  /** One retry at a time: none is scheduled while one is sending (it schedules the next when it ends). */
  #schedule(delay: number): void {
    if (this.#retry !== undefined || this.#sending || this.#closed) return;
    this.#retryAt = Date.now() + delay;
    this.#retry = setTimeout(() => void this.#resend(), delay);
    this.#retry.unref?.();
  }

  /**
   * A store call succeeded (StoreCalls) while invalidations wait: the store answers again, so the
   * retry is sent now rather than at the end of its backoff (up to RETRY_MAX_MS), but never sooner
   * than RETRY_FIRST_MS after the last one (a store that takes reads and refuses invalidations,
   * an ACL, is not sent one per read).
   */
  #storeAnswers(): void {
    if (this.#retry === undefined || this.#sending || this.#closed) return;
    const soonest = Math.max(Date.now(), this.#lastSent + RETRY_FIRST_MS);
    if (this.#retryAt <= soonest) return;
    clearTimeout(this.#retry);
    this.#retry = undefined;
    this.#schedule(soonest - Date.now());
  }

  /**
   * Sends the pending invalidations again (a clear, the keys with the latest time any of them was
   * invalidated at, the tags); they stay pending (and unread, ./unsent) until the store took them.
   * What fails again is retried later, the delay doubled.
   */
  async #resend(): Promise<void> {
    this.#retry = undefined;
    const unsent = this.#unsent;
    if (!unsent.any) {
      this.#retryDelay = RETRY_FIRST_MS; // retired meanwhile: the next outage starts from the first delay
      return;
    }
    const sent = unsent.snapshot();
    const keys = [...sent.keys.keys()];
    const tags = [...sent.tags.keys()];
    this.#sending = true;
    this.#lastSent = Date.now();
    const [cleared, deleted, bumped] = await Promise.all([
      sent.clear === 0 || this.#clear(),
      keys.length === 0 || this.#delete(keys, sent.at),
      tags.length === 0 || this.#bump(tags),
    ]);
    this.#sending = false;
    unsent.taken(sent, deleted, bumped, cleared);
    const bumpedTags = bumped === true ? tags : bumped === false ? [] : tags.filter((tag) => !bumped.has(tag));
    // The loads of what it covers still reading the store (or waiting on a lock) read it before it
    // landed; judged after taken(), what they read would no longer be refused: abandoned. Those
    // filling were judged misses while it waited and compute from the source: kept.
    if (this.#store.invalidatesAtOnce !== true)
      this.#abandonFlights(deleted ? keys : [], bumpedTags, sent.clear !== 0 && cleared, RESENT, true, 0, true);
    // A part taken (a half-open breaker lets one call through): the store answers, so the rest
    // goes again after the first delay, not a doubled one.
    const none = (sent.clear === 0 || !cleared) && (keys.length === 0 || !deleted) && bumpedTags.length === 0;
    this.#retryDelay = none ? Math.min(2 * this.#retryDelay, RETRY_MAX_MS) : RETRY_FIRST_MS;
    if (unsent.any) this.#schedule(this.#retryDelay); // failed, or failed again while this one was sending
  }

  /**
   * After an invalidation's store call (it took, or failed): the fills of what it covers that
   * started while the call was on its way read the store before it landed (the value it removes,
   * a tag's version before its bump: a Cluster's bump is two steps) and would answer callers
   * arriving after the invalidation returned. They are abandoned too (their callers start over),
   * and what the outage memo took meanwhile is dropped. Those started before were abandoned by
   * abandon() when the invalidation began (flights numbered up to `since`).
   */
  #sweep(keys: readonly string[], tags: readonly string[], all: boolean, since: number, why: string): void {
    // None started meanwhile, or none could read around the call (it took effect before its promise).
    if (flightsStarted() === since || this.#store.invalidatesAtOnce === true) return;
    this.#storeCalls.outage.drop(keys, tags, all);
    this.#abandonFlights(keys, tags, all, why, true, since);
  }

  /** Marks the primes in flight of `keys`, carrying one of `tags`, or all of them, as superseded. */
  #supersedePrimes(keys: readonly string[], tags: readonly string[], all: boolean): void {
    const tagSet = tags.length > 0 ? new Set(tags) : undefined;
    for (const prime of this.#primes) {
      if (
        all ||
        keys.includes(prime.key) ||
        (tagSet !== undefined && prime.tags?.some((tag) => tagSet.has(tag)) === true)
      ) {
        prime.superseded = true;
        // Still pending: it will do nothing, so it is not held for a promise that may never settle.
        // Past its value, it still fences: kept, so a later prime of the key writes after it.
        if (!prime.valueKnown) this.#primes.delete(prime);
      }
    }
  }

  /**
   * Abandons the fills in flight of `keys`, of values carrying `tags`, or all of them. `patient`
   * (an invalidation, not the cache closing): a flight its callers re-contended to often enough is
   * detached instead, its result theirs (see Flight's header).
   */
  abandon(keys: readonly string[], tags: readonly string[], all: boolean, why: string, patient = true): void {
    this.#storeCalls.outage.invalidate(keys, tags, all); // nor read while the store cannot be (./outage)
    if (this.#primes.size > 0) this.#supersedePrimes(keys, tags, all);
    this.#abandonFlights(keys, tags, all, why, patient, 0);
  }

  /**
   * Abandons the flights of `keys`, of values carrying `tags`, or all, started after the `after`-th
   * (0: any); `unfilled`: only those whose fill has not started (reading the store, or waiting on a lock).
   */
  #abandonFlights(
    keys: readonly string[],
    tags: readonly string[],
    all: boolean,
    why: string,
    patient: boolean,
    after: number,
    unfilled = false,
  ): void {
    const reason = new HerdcacheError('E_INVALIDATED', `herdcache: ${why}`);
    if (all) {
      this.#flights.abandonAll(reason, patient, after, unfilled);
      return;
    }
    for (const key of keys) {
      const flight = this.#flights.get(key);
      if (flight !== undefined && flight.seq > after && !(unfilled && flight.run !== undefined))
        this.#flights.abandon(flight, reason, patient);
    }
    if (tags.length > 0) this.#flights.abandonTagged(new Set(tags), reason, patient, after, unfilled);
  }
}

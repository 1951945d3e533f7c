/**
 * The distributed fill lock, seed 000's protocol, for the keys the read step found missing: try
 * the locks of all of them in one call; keys won are filled and written fenced (FillWrite); keys
 * held elsewhere are polled with capped exponential backoff (each poll re-reads and re-tries the
 * lock; a holder's announcement ends the sleep early) until the value appears, the lock is won,
 * or lockWaitTimeout passes, after which the key is filled here: bounded damage, never
 * unavailability.
 */
import type { FlightTable } from './flight-table';
import type { Clock, Entry } from './freshness';
import type { Item } from './item';
import type { FillWrite } from './fill-write';
import { countOn } from './metrics';
import { DEFAULTS, type LockTiming } from './options';
import type { FillLock, LockAttempt, LockWatch, Store } from './store';
import type { StoreCalls } from './store-calls';
import { beginReads, endReads } from './read-window';
import { ownTagVersions, readTagVersions, usable } from './validity';
import { readClock } from './late-tags';

/**
 * The lock step as the pipeline's read began it (FillLock.readOrAcquire): the token it locked
 * under, the watch it opened, and the attempts it made (the first attempt of those items).
 */
export interface BegunLocks {
  readonly token: string;
  readonly watch: LockWatch | undefined;
  readonly attempts: ReadonlyMap<Item, LockAttempt>;
}

/** What the lock step needs from the registry. */
export interface LockWaitDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
  readonly flights: FlightTable;
  readonly timing: LockTiming;
  /** Unique per registry: fill-lock tokens are this plus a sequence number. */
  readonly tokenPrefix: string;
  readonly storeCalls: StoreCalls;
}

export class LockWait {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #flights: FlightTable;
  readonly #timing: LockTiming;
  readonly #tokenPrefix: string;
  readonly #calls: StoreCalls;
  readonly #fills: FillWrite;
  #tokenSeq = 0;

  constructor(deps: LockWaitDeps, fills: FillWrite) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#sleep = deps.sleep;
    this.#flights = deps.flights;
    this.#timing = deps.timing;
    this.#tokenPrefix = deps.tokenPrefix;
    this.#calls = deps.storeCalls;
    this.#fills = fills;
  }

  /** A new fill-lock token, unique to this registry. */
  token(): string {
    return `${this.#tokenPrefix}.${++this.#tokenSeq}`;
  }

  /**
   * Locks, waits for and fills `items` (all on a store with a lock); settles every flight. `begun`:
   * the pipeline's read tried some of their locks already (its attempts are their first).
   */
  async lockAndFill(items: Item[], begun?: BegunLocks): Promise<void> {
    const lock = this.#store.lock!;
    const fills: Promise<void>[] = [];
    // Opened before the first attempt: a holder's announcement that lands while it is in flight
    // is kept, and ends the first wait at once. (The read opened one on the keys it tried, if it
    // could: without it, its attempts registered nowhere, and the next ones will.)
    let watch = begun?.watch;
    const rest = watch === undefined ? items : items.filter((item) => !begun!.attempts.has(item));
    if (rest.length > 0 && lock.watch !== undefined) {
      const keys = rest.map((item) => item.key);
      if (watch === undefined) watch = lock.watch(keys);
      else watch.add?.(keys);
    }
    try {
      await this.#waitForLocks(lock, items, watch, fills, begun);
    } finally {
      watch?.close();
    }
    await Promise.all(fills);
  }

  async #waitForLocks(
    lock: FillLock,
    items: Item[],
    watch: LockWatch | undefined,
    fills: Promise<void>[],
    begun: BegunLocks | undefined,
  ): Promise<void> {
    const token = begun?.token ?? this.token();
    const { lockTtl, lockPollInterval, lockWaitTimeout } = this.#timing;
    const calls = this.#calls;
    const deadline = this.#clock.now() + lockWaitTimeout;
    let waiting = items;
    let delay = lockPollInterval;
    /** Per key still waited on: the token of the lock its last attempt found (see LockWatch.take). */
    const holders = watch?.take === undefined ? undefined : new Map<string, string>();
    // Late-tagged items not clocked by the read read the tag clock alongside their first lock call,
    // which precedes their fill (late-tags): no round trip of its own.
    let clockRead = readClock(this.#store, calls, items);
    for (let attempt = 0; ; attempt++) {
      // Each attempt reads the key: a caller coming meanwhile waits for its answer (./read-window).
      const polled = waiting;
      beginReads(polled, false);
      let attempts: (LockAttempt | undefined)[] | undefined;
      if (attempt === 0 && begun !== undefined) {
        // The read's attempts, and one acquire for the items it did not try.
        const tried = begun.attempts;
        const rest = waiting.filter((item) => !tried.has(item));
        let others: (LockAttempt | undefined)[] | undefined = [];
        if (rest.length > 0) {
          const keys = rest.map((item) => item.key);
          const refreshing = refreshFlags(rest);
          others = await calls.call('lock.acquire', () => lock.acquire(keys, token, lockTtl, refreshing), rest);
          if (others === undefined) {
            // As for a failed call below: these are filled without the lock, released in case.
            void calls.call('lock.release', () => lock.release(keys, token), rest);
            fills.push(this.#fills.fill(rest, undefined, 'failed'));
            waiting = waiting.filter((item) => tried.has(item));
          }
        }
        let next = 0;
        attempts = waiting.map((item) => tried.get(item) ?? others![next++]);
      } else {
        const keys = waiting.map((item) => item.key);
        const refreshing = refreshFlags(waiting);
        attempts = await calls.call('lock.acquire', () => lock.acquire(keys, token, lockTtl, refreshing), waiting);
        if (attempts === undefined) {
          // The store failed or timed out: fill without the lock rather than wait on it. The
          // script may still have run late and taken locks under our token: release them (compare
          // and delete), or other replicas would wait on them until lockTtl.
          void calls.call('lock.release', () => lock.release(keys, token), waiting);
          endReads(polled);
          fills.push(this.#fills.fill(waiting, undefined, 'failed'));
          break;
        }
      }
      if (clockRead !== undefined) {
        await clockRead;
        clockRead = undefined;
      }
      const won: Item[] = [];
      const release: string[] = [];
      const next: Item[] = [];
      /** Keys whose lock call failed alone (a Cluster master down): filled without the lock. */
      let lost: Item[] | undefined;
      /**
       * Tagged items whose versions are read again first, with the entry found and the attempt:
       * won after a wait, or with an entry found when a caller joined after they were read.
       */
      let stale: [Item, Entry | undefined, LockAttempt][] | undefined;
      let current = ownTagVersions(
        this.#store,
        calls,
        waiting,
        attempts.map((attempt) => attempt?.entry),
      );
      if (current instanceof Promise) current = await current;
      const now = this.#clock.now();
      for (let i = 0; i < waiting.length; i++) {
        const item = waiting[i]!;
        const source = item.source;
        const result: LockAttempt | undefined = attempts[i];
        // An entry an invalidation the store has not taken yet covers is none (./unsent).
        const entry =
          result?.entry !== undefined && !calls.unsent.covers(item.key, result.entry) ? result.entry : undefined;
        if (result === undefined) {
          // Its part of the call failed (the rest answered): fill it here, as for a failed call,
          // and release in case the script ran late.
          if (!item.flight.abandoned) (lost ??= []).push(item);
          release.push(item.key);
        } else if (item.flight.abandoned) {
          if (result.won) {
            source.counters.lockAcquired++; // won, its flight gone meanwhile (as the read step counts one)
            release.push(item.key);
          }
        } else if (entry !== undefined && usable(item, entry, now, current)) {
          // Re-check after acquiring: another process wrote it since our read. Judged by the tags'
          // versions read before the wait: a caller that joined since may have come after an
          // invalidation they predate (another replica's), so they are read again first.
          if (item.flight.joinedSinceRead && item.tags !== undefined && this.#store.tagVersions !== undefined)
            (stale ??= []).push([item, entry, result]);
          else {
            if (result.won) release.push(item.key);
            this.#flights.resolve(item.flight, entry.value);
          }
        } else if (result.won) {
          // Won after waiting: its tags' versions were read before the wait, and an invalidation
          // meanwhile (the holder's fill abandoned and filled again) would make the entry found
          // look stale and this fill's write outdated at once (a wasted fill, twice): read anew.
          if (attempt > 0 && item.tags !== undefined && this.#store.tagVersions !== undefined)
            (stale ??= []).push([item, entry, result]);
          else {
            source.counters.lockAcquired++;
            won.push(item);
          }
        } else if (item.flight.background && entry !== undefined) {
          // Another process refreshes this key: keep serving the stale value it replaces.
          if (attempt === 0) countOn(source, 'lockContended', item.sink);
          this.#flights.resolve(item.flight, entry.value);
        } else {
          if (attempt === 0) countOn(source, 'lockContended', item.sink);
          next.push(item);
          if (holders !== undefined) {
            if (result.holder === undefined) holders.delete(item.key);
            else holders.set(item.key, result.holder);
          }
        }
      }
      if (stale !== undefined) {
        const items = stale.map(([item]) => item);
        for (const item of items) item.flight.joinedSinceRead = false; // its callers so far came before this read
        await readTagVersions(this.#store, calls, items);
        const read = this.#clock.now();
        for (const [item, entry, result] of stale) {
          if (item.flight.abandoned) {
            if (result.won) {
              item.source.counters.lockAcquired++;
              release.push(item.key);
            }
          } else if (entry !== undefined && usable(item, entry, read, current)) {
            if (result.won) release.push(item.key); // written since, at the versions now current: answered
            this.#flights.resolve(item.flight, entry.value);
          } else if (result.won) {
            item.source.counters.lockAcquired++;
            won.push(item);
          } else {
            next.push(item); // held elsewhere (filled anew after the invalidation): waited for
            if (holders !== undefined) {
              if (result.holder === undefined) holders.delete(item.key);
              else holders.set(item.key, result.holder);
            }
          }
        }
      }
      endReads(polled);
      if (release.length > 0) void calls.call('lock.release', () => lock.release(release, token), waiting);
      if (won.length > 0) fills.push(this.#fills.fill(won, token, 'won'));
      if (lost !== undefined) fills.push(this.#fills.fill(lost, undefined, 'failed'));
      waiting = next;
      if (waiting.length === 0) break;
      const left = deadline - this.#clock.now();
      if (left <= 0) {
        // Bounded damage, never unavailability: stop waiting on the other process and fill here.
        for (const item of waiting) countOn(item.source, 'lockTimeouts', item.sink);
        fills.push(this.#fills.fill(waiting, undefined, 'timeout'));
        break;
      }
      // Never sleep past the deadline; the last poll lands on it. A holder's announcement (where
      // the store has them) ends the sleep early: the next attempt re-reads the value it wrote,
      // unless the announcement carried it.
      const sleep = this.#sleep(Math.min(delay, left));
      await (watch === undefined ? sleep : watch.wait(sleep));
      delay = Math.min(delay * 2, DEFAULTS.lockPollCap);
      waiting = waiting.filter((item) => !item.flight.abandoned);
      if (waiting.length > 0 && holders !== undefined) waiting = await this.#answerAnnounced(watch!, waiting, holders);
      if (waiting.length === 0) break;
    }
  }

  /**
   * Answers the keys whose holder announced its write with the value (LockWatch.take), when that
   * value is usable, as the next attempt's re-read would have: the same value, without the round
   * trip. Returns the keys left for that attempt (none announced with a value, or not usable).
   */
  async #answerAnnounced(watch: LockWatch, waiting: Item[], holders: ReadonlyMap<string, string>): Promise<Item[]> {
    let announced: Item[] | undefined;
    let entries: Entry[] | undefined;
    for (const item of waiting) {
      const holder = holders.get(item.key);
      // A caller joined since the last read: the value, announced when written, may predate an
      // invalidation that returned before it came. The next attempt reads (./read-window).
      if (holder === undefined || item.flight.joinedSinceRead) continue;
      const entry = watch.take!(item.key, holder);
      if (entry === undefined) continue;
      (announced ??= []).push(item);
      (entries ??= []).push(entry);
    }
    if (announced === undefined || entries === undefined) return waiting;
    let current = ownTagVersions(this.#store, this.#calls, announced, entries);
    if (current instanceof Promise) {
      beginReads(announced, false); // a caller coming during this read waits for its answer (./read-window)
      current = await current;
    }
    const now = this.#clock.now();
    let answered: Set<Item> | undefined;
    for (let i = 0; i < announced.length; i++) {
      const item = announced[i]!;
      const entry = entries[i]!;
      if (item.flight.abandoned || !usable(item, entry, now, current) || this.#calls.unsent.covers(item.key, entry))
        continue;
      this.#flights.resolve(item.flight, entry.value);
      (answered ??= new Set()).add(item);
    }
    endReads(announced);
    if (answered === undefined) return waiting;
    return waiting.filter((item) => !answered.has(item) && !item.flight.abandoned);
  }
}

/**
 * Per item, whether it is a background refresh (it serves the entry it finds under another
 * process's lock instead of waiting: see FillLock.acquire), or undefined when none is.
 */
function refreshFlags(items: readonly Item[]): boolean[] | undefined {
  let flags: boolean[] | undefined;
  for (let i = 0; i < items.length; i++)
    if (items[i]!.flight.background) (flags ??= new Array<boolean>(items.length).fill(false))[i] = true;
  return flags;
}

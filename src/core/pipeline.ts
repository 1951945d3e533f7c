/**
 * The miss pipeline: what happens to the keys missed in one tick, after the registry has put
 * each in a flight. One store read for all of them (the double-check), then, for what is still
 * missing, the fill locks in one call, the user's functions for exactly the keys this process
 * won, and the fenced write. Every store call is bounded by the store and never fails a load:
 * a failure is counted and the value is computed.
 */
import { StorePartialError } from './errors';
import { Failure, FillRun, type Flight, type FlightTable } from './flight';
import { type Clock, type Entry, makeEntry, physicalTtl, refreshEarly } from './freshness';
import type { CounterName, Sink } from './metrics';
import { DEFAULTS, type LockTiming, type Policy, storesValues } from './options';
import type { FillLock, LockAttempt, LockWatch, Store, StoreWrite } from './store';
import type { CacheHooks, Counters, FillInfo } from './types';
import { WrappedFill, runGroup, wrapped } from './fill-call';
import { knownVersions, tagsValid, usable } from './validity';
import { LateTagged } from './late-tags';

/** One key waiting to be read, locked or filled. */
export interface Item {
  readonly source: Source;
  readonly key: string;
  readonly flight: Flight;
  /** What the source's fill needs for this key: the loader's own key, or the getOrCompute fill. */
  readonly arg: unknown;
  readonly policy: Policy;
  /** The request scope of the caller that started the flight: fills are attributed to it. */
  readonly sink: Sink | undefined;
  /** For a background refresh: freshUntil of the entry it replaces (a newer entry ends it). */
  readonly replaces?: number;
  /** Tags of the value (loader `tags(key)`, or getOrCompute's `tags`). */
  readonly tags: readonly string[] | undefined;
  /** On a tag-versioned store: the tags' versions read before the fill, aligned with `tags`. */
  versions?: readonly number[];
  /**
   * Whether the load that started this flight is already counted (a caller re-contending after
   * an abandoned flight, or a background refresh, which is no load): the outcome recorded at
   * dispatch (hit, miss, stale) is then skipped, so every load counts exactly once.
   */
  counted: boolean;
}

/** Something that computes values: a loader, or getOrCompute. */
export interface Source {
  readonly name: string;
  readonly counters: Counters;
  /** @internal Splits the items to fill into calls of the user's function (batches, or one per key). */
  groups(items: Item[]): Item[][];
  /** @internal Runs one call; returns per item a value, `undefined` (nothing to cache), or a Failure. */
  run(items: Item[], signal: AbortSignal): Promise<unknown[]>;
  /** @internal Tags of the value for `arg` (a loader's tags option); computed on a miss only. */
  tagsOf?(arg: unknown): readonly string[] | undefined;
  /** @internal The source's own batch window (a loader's batchScheduleFn); default: one dispatch per tick for all. */
  readonly schedule?: (dispatch: () => void) => void;
}

/** What the pipeline needs from the registry that owns it. */
export interface PipelineHost {
  readonly store: Store;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
  readonly flights: FlightTable;
  readonly timing: LockTiming;
  /** Unique per registry: fill-lock tokens are this plus a sequence number. */
  readonly tokenPrefix: string;
  /** Where failures of store calls that concern no source are counted. */
  readonly fallback: Counters;
  record(
    source: Source,
    counter: 'hits' | 'misses' | 'coalesced' | 'staleServed',
    key: string,
    sink: Sink | undefined,
  ): void;
  /** The outcome of an item's read: counts its load (unless counted) and the callers that joined its flight. */
  settled(item: Item, counter: 'hits' | 'staleServed' | 'misses'): void;
  count(source: Source, counter: CounterName, sink: Sink | undefined): void;
  hook<N extends 'onFill' | 'onStoreError'>(name: N, ...args: Parameters<NonNullable<CacheHooks[N]>>): void;
  refresh(source: Source, key: string, arg: unknown, policy: Policy, replacing: Entry): void;
  /** The wrapFill hook in force now, or undefined (then no FillInfo is made). */
  fillWrapper(): CacheHooks['wrapFill'];
}

export type LockOutcome = FillInfo['lock'];

export class FillPipeline {
  readonly #host: PipelineHost;
  readonly #store: Store;
  readonly #getSync: ((key: string) => Entry | undefined) | undefined;
  readonly #clock: Clock;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #flights: FlightTable;
  readonly #timing: LockTiming;
  readonly #tokenPrefix: string;
  #tokenSeq = 0;

  constructor(host: PipelineHost) {
    this.#host = host;
    this.#store = host.store;
    this.#getSync = host.store.getSync?.bind(host.store);
    this.#clock = host.clock;
    this.#sleep = host.sleep;
    this.#flights = host.flights;
    this.#timing = host.timing;
    this.#tokenPrefix = host.tokenPrefix;
  }

  /**
   * One dispatch: the keys missed in this tick by every loader and getOrCompute, read in one
   * store call (the double-check: a value written since the caller's own read is not
   * recomputed), then locked in one call and filled, each source in its own batches.
   */
  async dispatch(queued: Item[]): Promise<void> {
    const live = queued.filter((item) => !this.#droppedBeforeOutcome(item));
    // Coalesce-only items (ttl 0) never touch the store: no read, no lock, no write. They are
    // misses by definition and go straight to their fill, batched with the tick's other keys.
    let items = live;
    let unstored: Item[] | undefined;
    for (const item of live) {
      if (storesValues(item.policy)) continue;
      unstored = live.filter((it) => !storesValues(it.policy));
      items = live.filter((it) => storesValues(it.policy));
      break;
    }
    if (unstored !== undefined) {
      for (const item of unstored) this.#host.settled(item, 'misses');
      if (items.length === 0) return this.#fill(unstored, undefined, 'none');
    }
    if (items.length === 0) return;
    const versioned = this.#store.tagVersions !== undefined && items.some((item) => item.tags !== undefined);
    // Tag versions are read with the entries (same tick, in parallel) and BEFORE any fill: a fill
    // records them, so an invalidation landing during the fill makes its write a miss.
    const [entries] = await Promise.all([this.#read(items), versioned ? this.#readTagVersions(items) : undefined]);
    let current = this.#ownTagVersions(items, entries);
    if (current instanceof Promise) current = await current;
    const now = this.#clock.now();
    const toFill: Item[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const entry = entries[i];
      const source = item.source;
      if (this.#droppedBeforeOutcome(item)) continue;
      if (entry !== undefined && usable(item, entry, now, current)) {
        this.#host.settled(item, 'hits');
        this.#settleFromStore(item, entry.value);
        if (!item.flight.background && item.policy.beta > 0 && refreshEarly(entry, now, item.policy.beta)) {
          this.#host.refresh(source, item.key, item.arg, item.policy, entry);
        }
      } else if (
        entry !== undefined &&
        now < entry.staleUntil &&
        !item.flight.background &&
        tagsValid(item, entry, current)
      ) {
        this.#host.settled(item, 'staleServed');
        this.#settleFromStore(item, entry.value);
        this.#host.refresh(source, item.key, item.arg, item.policy, entry);
      } else {
        this.#host.settled(item, 'misses');
        toFill.push(item);
      }
    }
    if (unstored !== undefined) toFill.push(...unstored);
    if (toFill.length === 0) return;
    const locking = this.#store.lock !== undefined ? toFill.filter(locks) : [];
    const unlocked =
      locking.length === toFill.length ? [] : locking.length === 0 ? toFill : toFill.filter((item) => !locks(item));
    await Promise.all([
      this.#fill(unlocked, undefined, 'none'),
      locking.length > 0 ? this.#lockAndFill(locking) : undefined,
    ]);
  }

  /**
   * Whether an item's flight was abandoned before the store told us its outcome. Its caller's
   * load still counts once: it found no usable value here and started a fill, i.e. a miss.
   */
  #droppedBeforeOutcome(item: Item): boolean {
    if (!item.flight.abandoned) return false;
    this.#host.settled(item, 'misses'); // its joiners joined a flight that would have filled: coalesced
    return true;
  }

  /** Sets each tagged item's `versions`; NaN where unknown (the store failed): never valid, never written. */
  async #readTagVersions(items: Item[]): Promise<void> {
    const unique = [...new Set(items.flatMap((item) => item.tags ?? []))];
    const versions = await this.storeCall('tagVersions', () => this.#store.tagVersions!(unique), items);
    const byTag = new Map<string, number>();
    if (versions !== undefined) for (let i = 0; i < unique.length; i++) byTag.set(unique[i]!, versions[i]!);
    for (const item of items)
      if (item.tags !== undefined) item.versions = item.tags.map((tag) => byTag.get(tag) ?? NaN);
  }

  /**
   * Validity follows the entry, not the caller: an entry that records tags is a miss once any of
   * them was invalidated, whether or not this load names them. Items that name tags are judged
   * against the versions read with the entries (#readTagVersions); for entries carrying tags
   * their item did not name, the current versions of those tags are read here (one call, only
   * when there are such entries). Returns tag → current version (NaN: unknown, never valid), or
   * undefined when no entry needs it (or the store enforces tags itself).
   */
  #ownTagVersions(
    items: readonly Item[],
    entries: readonly (Entry | undefined)[],
  ): Map<string, number> | Promise<Map<string, number>> | undefined {
    const store = this.#store;
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
    return this.storeCall('tagVersions', () => store.tagVersions!(tags), items).then((versions) => {
      for (let i = 0; i < tags.length; i++) known.set(tags[i]!, versions?.[i] ?? NaN);
      return known;
    });
  }

  async #read(items: Item[]): Promise<(Entry | undefined)[]> {
    // A getSync that sees the whole store answers the double-check without a round trip; one
    // that sees a part (a tiered store's L1) does not: the rest is read with getMany.
    const getSync = this.#getSync;
    if (getSync !== undefined && this.#store.getSyncComplete !== false) return items.map((item) => getSync(item.key));
    const entries = await this.storeCall('getMany', () => this.#store.getMany(items.map((item) => item.key)), items);
    return entries ?? [];
  }

  #settleFromStore(item: Item, value: unknown): void {
    this.#flights.resolve(item.flight, value);
  }

  /**
   * The distributed fill lock, seed 000's protocol: try the locks of every missing key in one
   * call; keys won are filled and written fenced; keys held elsewhere are polled with capped
   * exponential backoff (each poll re-reads and re-tries the lock) until the value appears,
   * the lock is won, or lockWaitTimeout passes, after which the key is filled locally.
   */
  async #lockAndFill(items: Item[]): Promise<void> {
    const lock = this.#store.lock!;
    const fills: Promise<void>[] = [];
    // Opened before the first attempt: a holder's announcement that lands while it is in flight
    // is kept, and ends the first wait at once.
    const watch = lock.watch?.(items.map((item) => item.key));
    try {
      await this.#waitForLocks(lock, items, watch, fills);
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
  ): Promise<void> {
    const token = `${this.#tokenPrefix}.${++this.#tokenSeq}`;
    const { lockTtl, lockPollInterval, lockWaitTimeout } = this.#timing;
    const deadline = this.#clock.now() + lockWaitTimeout;
    let waiting = items;
    let delay = lockPollInterval;
    for (let attempt = 0; ; attempt++) {
      const attempts = await this.storeCall(
        'lock.acquire',
        () =>
          lock.acquire(
            waiting.map((item) => item.key),
            token,
            lockTtl,
          ),
        waiting,
      );
      if (attempts === undefined) {
        // The store failed or timed out: fill without the lock rather than wait on it. The
        // script may still have run late and taken locks under our token: release them (compare
        // and delete), or other replicas would wait on them until lockTtl.
        const keys = waiting.map((item) => item.key);
        void this.storeCall('lock.release', () => lock.release(keys, token), waiting);
        fills.push(this.#fill(waiting, undefined, 'failed'));
        break;
      }
      const won: Item[] = [];
      const release: string[] = [];
      const next: Item[] = [];
      /** Keys whose lock call failed alone (a Cluster master down): filled without the lock. */
      let lost: Item[] | undefined;
      let current = this.#ownTagVersions(
        waiting,
        attempts.map((attempt) => attempt?.entry),
      );
      if (current instanceof Promise) current = await current;
      const now = this.#clock.now();
      for (let i = 0; i < waiting.length; i++) {
        const item = waiting[i]!;
        const source = item.source;
        const result: LockAttempt | undefined = attempts[i];
        if (result?.won) source.counters.lockAcquired++;
        if (result === undefined) {
          // Its part of the call failed (the rest answered): fill it here, as for a failed call,
          // and release in case the script ran late.
          if (!item.flight.abandoned) (lost ??= []).push(item);
          release.push(item.key);
        } else if (item.flight.abandoned) {
          if (result.won) release.push(item.key);
        } else if (result?.entry !== undefined && usable(item, result.entry, now, current)) {
          // Re-check after acquiring: another process wrote it since our read.
          if (result.won) release.push(item.key);
          this.#settleFromStore(item, result.entry.value);
        } else if (result.won) {
          won.push(item);
        } else if (item.flight.background && result.entry !== undefined) {
          // Another process refreshes this key: keep serving the stale value it replaces.
          if (attempt === 0) this.#host.count(source, 'lockContended', item.sink);
          this.#settleFromStore(item, result.entry.value);
        } else {
          if (attempt === 0) this.#host.count(source, 'lockContended', item.sink);
          next.push(item);
        }
      }
      if (release.length > 0) void this.storeCall('lock.release', () => lock.release(release, token), waiting);
      if (won.length > 0) fills.push(this.#fill(won, token, 'won'));
      if (lost !== undefined) fills.push(this.#fill(lost, undefined, 'failed'));
      waiting = next;
      if (waiting.length === 0) break;
      const left = deadline - this.#clock.now();
      if (left <= 0) {
        // Bounded damage, never unavailability: stop waiting on the other process and fill here.
        for (const item of waiting) this.#host.count(item.source, 'lockTimeouts', item.sink);
        fills.push(this.#fill(waiting, undefined, 'timeout'));
        break;
      }
      // Never sleep past the deadline; the last poll lands on it. A holder's announcement (where
      // the store has them) ends the sleep early: the next attempt re-reads the value it wrote.
      const sleep = this.#sleep(Math.min(delay, left));
      await (watch === undefined ? sleep : watch.wait(sleep));
      delay = Math.min(delay * 2, DEFAULTS.lockPollCap);
      waiting = waiting.filter((item) => !item.flight.abandoned);
      if (waiting.length === 0) break;
    }
  }

  /** Runs each source's function for its items (in its groups), writes what succeeded, settles all. */
  async #fill(all: Item[], token: string | undefined, lock: LockOutcome): Promise<void> {
    // A flight abandoned before its fill starts is not filled (the only such path is a failed lock
    // call, where no lock is held; with a token, callers pass flights checked in this very step).
    const items = all.filter((item) => !item.flight.abandoned);
    if (items.length === 0) return;
    const bySource = new Map<Source, Item[]>();
    for (const item of items) {
      const list = bySource.get(item.source);
      if (list === undefined) bySource.set(item.source, [item]);
      else list.push(item);
    }
    const runs: Promise<void>[] = [];
    for (const [source, list] of bySource)
      for (const group of source.groups(list)) runs.push(this.#fillGroup(source, group, token, lock));
    await Promise.all(runs);
  }

  async #fillGroup(source: Source, items: Item[], token: string | undefined, lockOutcome: LockOutcome): Promise<void> {
    const run = new FillRun(items.length);
    for (const item of items) item.flight.run = run;
    const started = performance.now();
    const startedAt = this.#clock.now();
    const wrap = this.#host.fillWrapper();
    const results = await (wrap === undefined
      ? runGroup(source, items, run.signal)
      : wrapped(wrap, new WrappedFill(source, items, run.signal, lockOutcome)));
    const duration = performance.now() - started;
    const late = results.some((result) => result instanceof LateTagged)
      ? await this.#lateTags(items, results)
      : undefined;
    const now = this.#clock.now();
    const writes: StoreWrite[] = [];
    const release: string[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const result = results[i];
      const failed = result instanceof Failure;
      this.#host.count(source, failed ? 'fillFailures' : 'fills', item.sink);
      this.#host.hook('onFill', item.key, source.name, duration, failed ? result.error : undefined);
      if (item.flight.abandoned || failed || result === undefined) {
        // Abandoned (invalidated or cleared while filling: the result may be stale), failed
        // (errors are never cached: the next caller retries), or nothing to cache.
        if (token !== undefined) release.push(item.key);
      } else {
        if (!storesValues(item.policy)) continue; // coalesce-only: served, never written
        // Tags whose versions could not be read: the value is served but not cached.
        if (item.versions !== undefined && item.versions.some(Number.isNaN)) {
          if (token !== undefined) release.push(item.key);
          continue;
        }
        const tagged = late?.[i];
        if (tagged !== undefined && tagged.versions?.some(Number.isNaN)) {
          if (token !== undefined) release.push(item.key);
          continue;
        }
        const entry = makeEntry(results[i], now, item.policy, {
          fillMs: item.policy.beta > 0 ? now - startedAt : undefined,
          tags: tagged === undefined ? item.tags : tagged.tags,
          tagVersions: tagged === undefined ? item.versions : tagged.versions,
        });
        // Without the lock nothing fences this write: `since` lets the store refuse it when the
        // key was invalidated after this fill started (the lockless gap).
        writes.push(
          token === undefined
            ? { key: item.key, entry, ttl: physicalTtl(entry, now), since: startedAt }
            : { key: item.key, entry, ttl: physicalTtl(entry, now) },
        );
      }
    }
    const lock = this.#store.lock;
    if (release.length > 0 && lock !== undefined && token !== undefined) {
      void this.storeCall('lock.release', () => lock.release(release, token), items);
    }
    // The write is issued (a store may gather it with others for a moment: redisStore sends the
    // fenced writes finishing together in one call) before the callers are answered, in the same
    // synchronous step: whatever a caller does next (a read, a delete) reaches the store after
    // it (memory: applied already; Redis: same connection, commands in order). With a lock, the
    // write lands only if our lock still stands.
    let written: Promise<unknown> | undefined;
    if (writes.length > 0) {
      written =
        lock !== undefined && token !== undefined
          ? this.storeCall('lock.writeAndRelease', () => lock.writeAndRelease(writes, token), items).then((landed) => {
              // Failed or timed out (all, or the part on a failing Cluster master): make sure no
              // lock of ours outlives this fill.
              const unsure = landed === undefined ? writes : writes.filter((_, i) => landed[i] === undefined);
              if (unsure.length > 0)
                void this.storeCall(
                  'lock.release',
                  () =>
                    lock.release(
                      unsure.map((w) => w.key),
                      token,
                    ),
                  items,
                );
            })
          : this.storeCall('setMany', () => this.#store.setMany(writes), items);
      // A lock that gathers writes for a moment (redisStore: to the end of the event-loop turn, so
      // the fills finishing in one turn share one call) says when they are on the connection; the
      // callers are answered after that, so the order above holds for them too.
      const sent = token === undefined ? undefined : lock?.sent?.();
      if (sent !== undefined) await sent;
    }
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (item.flight.abandoned) continue;
      const result = results[i];
      if (result instanceof Failure) this.#flights.fail(item.flight, result.error);
      else this.#flights.resolve(item.flight, result);
    }
    await written;
  }

  /**
   * Unwraps the LateTagged results of a fill in place (`results[i]` becomes the value) and returns,
   * per position, the entry's tags (the item's own plus the late ones) with their versions: the
   * item's read before the fill, the late ones read now in one call (see late-tags).
   */
  async #lateTags(
    items: Item[],
    results: unknown[],
  ): Promise<({ tags: readonly string[] | undefined; versions: readonly number[] | undefined } | undefined)[]> {
    const out: ({ tags: readonly string[] | undefined; versions: readonly number[] | undefined } | undefined)[] = [];
    const fresh = new Set<string>();
    for (let i = 0; i < items.length; i++) {
      const result = results[i];
      if (!(result instanceof LateTagged)) continue;
      results[i] = result.value;
      const own = items[i]!.tags ?? [];
      const tags = [...new Set([...own, ...result.tags])];
      for (const tag of tags) if (!own.includes(tag)) fresh.add(tag);
      out[i] = { tags: tags.length > 0 ? tags : undefined, versions: undefined };
    }
    const store = this.#store;
    if (store.tagVersions === undefined || fresh.size === 0) return out;
    const unique = [...fresh];
    const versions = await this.storeCall('tagVersions', () => store.tagVersions!(unique), items);
    const byTag = new Map<string, number>();
    for (let i = 0; i < unique.length; i++) byTag.set(unique[i]!, versions?.[i] ?? NaN);
    for (let i = 0; i < items.length; i++) {
      const late = out[i];
      if (late?.tags === undefined) continue;
      const item = items[i]!;
      late.versions = late.tags.map((tag) => {
        const at = item.tags?.indexOf(tag) ?? -1;
        return at >= 0 ? (item.versions?.[at] ?? NaN) : (byTag.get(tag) ?? NaN);
      });
    }
    return out;
  }

  /**
   * Calls the store; a failure is counted (once for each source it affected, or under
   * getOrCompute for calls of no source) and reported, and the load goes on without it.
   */
  async storeCall<T>(
    operation: string,
    call: () => Promise<T>,
    affected?: Source | readonly Item[],
  ): Promise<T | undefined> {
    try {
      return await call();
    } catch (error) {
      this.#countStoreError(operation, error, affected);
      // Part of the call succeeded (a Cluster master down, the others fine): use that part.
      return error instanceof StorePartialError ? (error.partial as T) : undefined;
    }
  }

  #countStoreError(operation: string, error: unknown, affected: Source | readonly Item[] | undefined): void {
    if (affected === undefined) this.#host.fallback.storeErrors++;
    else if (!Array.isArray(affected)) (affected as Source).counters.storeErrors++;
    else
      for (const source of new Set((affected as readonly Item[]).map((item) => item.source)))
        source.counters.storeErrors++;
    this.#host.hook('onStoreError', error, operation);
  }
}

/** Whether this item's fill takes the distributed lock: only values that are stored need one. */
function locks(item: Item): boolean {
  return item.policy.lock && storesValues(item.policy);
}

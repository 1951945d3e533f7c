/**
 * createCache(): the process-wide registry that ties the store, the in-flight fills, the
 * loaders and the metrics together.
 *
 * A load travels: request scope (memo) → registry (hit? in flight? else queue) → one store
 * read for the keys missed in this tick → fill locks for what is still missing → the user's
 * fill/batch function for exactly the keys this process won → fenced write → every waiter.
 */
import { HerdcacheError, describe, invalidArgument, invalidOption } from './errors';
import { Failure, FillRun, Flight, FlightTable, RETRY, asError } from './flight';
import { type Clock, type Entry, makeEntry, physicalTtl, refreshEarly, systemClock } from './freshness';
import { Loader } from './loader';
import { CounterSet, type CounterName, type Sink } from './metrics';
import { DEFAULTS, type LockTiming, type Policy, checkPositiveInteger, checkTags, resolveLockTiming, resolvePolicy } from './options';
import { RequestScope } from './scope';
import { memoryStore } from './stores/memory';
import type { LockAttempt, Store, StoreWrite } from './stores/store';
import type { CacheHooks, CacheOptions, Counters, Fill, GetOrComputeOptions, LoaderOptions, MetricsSnapshot } from './types';

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
}

/** Something that computes values: a loader, or getOrCompute. */
export interface Source {
  readonly name: string;
  readonly counters: Counters;
  /** Splits the items to fill into calls of the user's function (batches, or one per key). */
  groups(items: Item[]): Item[][];
  /** Runs one call; returns per item a value, `undefined` (nothing to cache), or a Failure. */
  run(items: Item[], signal: AbortSignal): Promise<unknown[]>;
  /** Tags of the value for `arg` (a loader's tags option); computed on a miss only. */
  tagsOf?(arg: unknown): readonly string[] | undefined;
}

const GET_OR_COMPUTE = 'getOrCompute';

/** Defers `fn` until the promise jobs queued now have run, then to the next tick: as DataLoader
 * does, so every resolver of the current execution phase enqueues its keys before the batch leaves. */
const resolved = Promise.resolve();
function afterPromiseJobs(fn: () => void): void {
  void resolved.then(() => process.nextTick(fn));
}

function realSleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

let registryIds = 0;

export class Cache {
  readonly #store: Store;
  readonly #getSync: ((key: string) => Entry | undefined) | undefined;
  readonly #clock: Clock;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #policy: Policy;
  readonly #timing: LockTiming;
  readonly #maxRefreshes: number;
  /** What is called: options.hooks alone, or every set of hooks fanned out (see observe()). */
  #hooks: CacheHooks;
  /** options.hooks first, then observe()d sets in the order they were added. */
  #hookSets: readonly CacheHooks[];
  readonly #flights = new FlightTable();
  readonly #counters = new CounterSet();
  readonly #loaders = new Map<string, Loader<unknown, unknown>>();
  readonly #gocSource: Source;
  readonly #labelSources = new Map<string, Source>();
  /** Items queued for the next dispatch, from every source. */
  #queued: Item[] = [];
  readonly #tokenPrefix: string;
  #tokenSeq = 0;
  #refreshing = 0;
  #closed = false;

  constructor(options: CacheOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    const store: Store = options.store ?? memoryStore();
    if (typeof store.getMany !== 'function' || typeof store.setMany !== 'function') {
      throw invalidOption('store', store, 'a Store (memoryStore(), redisStore(...))');
    }
    this.#store = store;
    this.#getSync = store.getSync?.bind(store);
    const clock = options.clock ?? systemClock;
    if (typeof clock?.now !== 'function') throw invalidOption('clock', clock, 'an object with a now() method');
    this.#clock = clock;
    this.#sleep = clock.sleep?.bind(clock) ?? realSleep;
    const hasLock = store.lock !== undefined;
    this.#policy = resolvePolicy(options, { ttl: undefined, swr: DEFAULTS.swr, jitter: DEFAULTS.jitter, lock: hasLock, beta: 0 });
    if (this.#policy.lock && !hasLock) this.#policy = { ...this.#policy, lock: false };
    this.#timing = resolveLockTiming(options);
    this.#maxRefreshes = options.maxRefreshes === undefined ? DEFAULTS.maxRefreshes : maxRefreshesOption(options.maxRefreshes);
    this.#hooks = options.hooks ?? {};
    this.#hookSets = options.hooks === undefined ? [] : [options.hooks];
    this.#tokenPrefix = `${process.pid}.${++registryIds}.${Math.random().toString(36).slice(2, 10)}`;
    this.#gocSource = {
      name: GET_OR_COMPUTE,
      counters: this.#counters.of(GET_OR_COMPUTE),
      groups: (items) => items.map((item) => [item]),
      run: (items, signal) => runFill(items[0]!, signal),
    };
    store.bind?.({
      encodeError: (key, error) => this.#storeProblem('encodeErrors', key, error, 'encode'),
      decodeError: (key, error) => this.#storeProblem('decodeErrors', key, error, 'decode'),
    });
  }

  /** Fills in flight in this process (for tests and leak checks). */
  get inFlight(): number {
    return this.#flights.size;
  }

  /**
   * Reads `key`, or computes it with `fill` once per process however many callers miss at
   * once. A `null` result is cached; `undefined` is returned but not cached.
   */
  getOrCompute<V>(key: string, fill: Fill<V>, options?: GetOrComputeOptions): Promise<V> {
    // The common call (no options) skips option resolution: the hit path stays a lookup.
    if (options === undefined && typeof key === 'string' && key.length > 0 && typeof fill === 'function') {
      return this._load<V>(this.#gocSource, key, fill, this.#policy, undefined, undefined);
    }
    return this._getOrCompute(key, fill, options, undefined);
  }

  /** @internal getOrCompute on behalf of a request scope. */
  _getOrCompute<V>(key: string, fill: Fill<V>, options: GetOrComputeOptions | undefined, sink: Sink | undefined): Promise<V> {
    try {
      checkKey(key, 'key');
      if (typeof fill !== 'function') throw invalidArgument('fill', fill, 'a function');
      let policy = resolvePolicy(options, this.#policy);
      if (options?.tags !== undefined) policy = { ...policy, tags: this.#checkTags('tags', options.tags) };
      const label = options?.label;
      const source = label === undefined ? this.#gocSource : this.#labelSource(label);
      return this._load<V>(source, key, fill, policy, options?.signal, sink);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** A batching loader shared by every request of this process. Names are unique per registry. */
  loader<K, V>(options: LoaderOptions<K, V>): Loader<K, V> {
    this.#assertOpen();
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    const { name } = options;
    if (typeof name !== 'string' || name.length === 0 || name === GET_OR_COMPUTE) {
      throw invalidOption('name', name, `a non-empty string other than "${GET_OR_COMPUTE}"`);
    }
    if (this.#loaders.has(name)) {
      throw new HerdcacheError('E_DUPLICATE_LOADER', `herdcache: a loader named ${JSON.stringify(name)} already exists in this cache`);
    }
    const policy = resolvePolicy(options, this.#policy);
    const loader = new Loader<K, V>(this, options, policy, this.#counters.of(name));
    this.#loaders.set(name, loader as Loader<unknown, unknown>);
    return loader;
  }

  /** A per-request view: DataLoader memo semantics for one operation, the registry underneath. */
  request(): RequestScope {
    return new RequestScope(this);
  }

  metrics(): MetricsSnapshot {
    return this.#counters.snapshot();
  }

  /**
   * Adds observer hooks after creation (a metrics plugin does, given only the cache); they run
   * after options.hooks. Returns a function that removes them. The sets are combined here, once,
   * so a load still reads one hook per event.
   */
  observe(hooks: CacheHooks): () => void {
    if (hooks === null || typeof hooks !== 'object') throw invalidArgument('hooks', hooks, 'an object of hook functions');
    this.#setHooks([...this.#hookSets, hooks]);
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      const sets = [...this.#hookSets];
      sets.splice(sets.indexOf(hooks), 1);
      this.#setHooks(sets);
    };
  }

  #setHooks(sets: readonly CacheHooks[]): void {
    this.#hookSets = sets;
    this.#hooks = sets.length === 0 ? {} : sets.length === 1 ? sets[0]! : fanOutHooks(sets);
  }

  /**
   * Removes `key` (a getOrCompute key, or a loader's `name:key`) from the store. A fill of it
   * already in flight is abandoned: its result is not written, and its waiters start over.
   */
  async invalidate(key: string | readonly string[]): Promise<void> {
    const keys = typeof key === 'string' ? [key] : key;
    if (!Array.isArray(keys)) throw invalidArgument('key', key, 'a string or an array of strings');
    for (const k of keys) checkKey(k, 'key');
    await this._invalidate(keys, GET_OR_COMPUTE);
  }

  /** @internal */
  async _invalidate(keys: readonly string[], source: string): Promise<void> {
    const reason = new HerdcacheError('E_INVALIDATED', 'herdcache: the key was invalidated while this fill ran');
    for (const key of keys) {
      const flight = this.#flights.get(key);
      if (flight !== undefined) this.#flights.abandon(flight, reason);
    }
    this.#counters.count(source, 'invalidations', keys.length);
    await this.#storeCall('delete', () => this.#store.delete(keys));
  }

  /**
   * Makes every entry carrying one of `tags` a miss, on every replica sharing the store, and
   * abandons the fills of tagged values in flight here (their results are not written; their
   * waiters start over). No scan of the keyspace: see the store's invalidateTags.
   */
  async invalidateTags(tags: readonly string[]): Promise<void> {
    this.#checkTags('tags', tags);
    if (tags.length === 0) return;
    this.#flights.abandonTagged(new Set(tags), new HerdcacheError('E_INVALIDATED', 'herdcache: a tag of this value was invalidated while it was filled'));
    this.#counters.count(GET_OR_COMPUTE, 'invalidations', tags.length);
    await this.#storeCall('invalidateTags', () => this.#store.invalidateTags!(tags));
  }

  /** @internal validates tags and that the store can invalidate them. */
  _checkTagsSupported(option: string): void {
    if (this.#store.invalidateTags === undefined) {
      throw new HerdcacheError('E_UNSUPPORTED', `herdcache: option "${option}" needs a store with invalidateTags (memoryStore, redisStore, tieredStore); "${this.#store.name}" has none`);
    }
  }

  #checkTags(name: string, tags: unknown): readonly string[] {
    this._checkTagsSupported(name);
    return checkTags(name, tags);
  }

  /** @internal writes values into the shared store now (loader.prime). */
  async _write(source: Source, pairs: readonly (readonly [string, unknown])[], policy: Policy): Promise<void> {
    const now = this.#clock.now();
    const writes: StoreWrite[] = [];
    for (const [key, value] of pairs) {
      if (value === undefined) continue;
      const entry = makeEntry(value, now, policy);
      writes.push({ key, entry, ttl: physicalTtl(entry, now) });
    }
    if (writes.length > 0) await this.#storeCall('setMany', () => this.#store.setMany(writes), source);
  }

  /** Empties the store and abandons every fill in flight (their waiters start over). */
  async clear(): Promise<void> {
    this.#flights.abandonAll();
    await this.#storeCall('clear', () => this.#store.clear());
  }

  /** Stops accepting new loaders and closes the store if it has a close(). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#flights.abandonAll();
    await this.#store.close?.();
  }

  // ── the load path ──────────────────────────────────────────────────────────────────────

  /**
   * @internal The load path shared by loaders and getOrCompute. With a synchronous store a hit
   * costs one map lookup, one clock read and one resolved promise.
   */
  _load<V>(source: Source, key: string, arg: unknown, policy: Policy, signal: AbortSignal | undefined, sink: Sink | undefined): Promise<V> {
    const getSync = this.#getSync;
    if (getSync !== undefined) {
      const entry = getSync(key);
      if (entry !== undefined) {
        const answer = this._answer(source, key, entry, arg, policy, sink);
        if (answer !== undefined) return answer as Promise<V>;
      }
    }
    return this._miss<V>(source, key, arg, policy, signal, sink);
  }

  /**
   * @internal Answers from an entry found by a synchronous read: fresh → hit; stale within
   * grace → served at once and one background refresh scheduled; expired → undefined (a miss).
   */
  _answer(source: Source, key: string, entry: Entry, arg: unknown, policy: Policy, sink: Sink | undefined): Promise<unknown> | undefined {
    const freshUntil = entry.freshUntil;
    if (freshUntil === Infinity) {
      this.#hit(source, key, sink);
      return (entry.resolved ??= Promise.resolve(entry.value));
    }
    const now = this.#clock.now();
    if (now < freshUntil) {
      this.#hit(source, key, sink);
      if (policy.beta > 0 && refreshEarly(entry, now, policy.beta)) this.#refresh(source, key, arg, policy, freshUntil);
      return (entry.resolved ??= Promise.resolve(entry.value));
    }
    if (now < entry.staleUntil) {
      this.#record(source, 'staleServed', key, sink);
      this.#refresh(source, key, arg, policy, freshUntil);
      return (entry.resolved ??= Promise.resolve(entry.value));
    }
    return undefined;
  }

  /** @internal Joins the key's flight, or starts one and queues it for the next dispatch. */
  _miss<V>(source: Source, key: string, arg: unknown, policy: Policy, signal: AbortSignal | undefined, sink: Sink | undefined): Promise<V> {
    if (this.#closed) return Promise.reject(new HerdcacheError('E_CLOSED', 'herdcache: the cache is closed'));
    if (signal?.aborted) return Promise.reject(signal.reason);
    let flight = this.#flights.get(key);
    if (flight !== undefined) {
      this.#record(source, 'coalesced', key, sink);
    } else {
      let tags: readonly string[] | undefined;
      try {
        tags = policy.tags ?? source.tagsOf?.(arg);
      } catch (error) {
        return Promise.reject(error);
      }
      flight = this.#flights.start(key, false);
      flight.tags = tags;
      this.#enqueue({ source, key, flight, arg, policy, sink, tags });
    }
    // A waiter whose flight is abandoned starts over from the top: the store may hold a value now.
    return this.#wait(flight, signal, () => this._load<V>(source, key, arg, policy, signal, sink));
  }

  #wait<V>(flight: Flight, signal: AbortSignal | undefined, retry: () => Promise<V>): Promise<V> {
    flight.waiters++;
    const promise = flight.promise as Promise<V>;
    if (signal === undefined) {
      return promise.then(undefined, (reason) => (reason === RETRY ? retry() : Promise.reject(reason)));
    }
    return new Promise<V>((resolve, reject) => {
      const onAbort = () => {
        // This caller leaves; the fill goes on for the others. Only the last one out abandons it.
        if (--flight.waiters === 0 && flight.pending && !flight.background) {
          this.#flights.abandon(flight, new HerdcacheError('E_ABANDONED', 'herdcache: every caller waiting on this fill aborted'));
        }
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      promise.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (reason) => {
          signal.removeEventListener('abort', onAbort);
          if (signal.aborted) return; // already rejected with the abort reason
          if (reason === RETRY) retry().then(resolve, reject);
          else reject(reason);
        },
      );
    });
  }

  /** Starts one background refresh of a stale key, unless one runs or the cap is reached. */
  #refresh(source: Source, key: string, arg: unknown, policy: Policy, replaces: number): void {
    if (this.#flights.get(key) !== undefined || this.#closed) return;
    if (this.#refreshing >= this.#maxRefreshes) {
      // Dropped, not queued: the stale value keeps being served and a later read retries.
      source.counters.refreshesDropped++;
      return;
    }
    let tags: readonly string[] | undefined;
    try {
      tags = policy.tags ?? source.tagsOf?.(arg);
    } catch {
      return; // the tags function threw: the caller that had it throw on a miss will see it
    }
    this.#refreshing++;
    source.counters.refreshes++;
    const flight = this.#flights.start(key, true);
    flight.tags = tags;
    const done = () => {
      this.#refreshing--;
    };
    flight.promise.then(done, done);
    this.#enqueue({ source, key, flight, arg, policy, sink: undefined, replaces, tags });
  }

  #enqueue(item: Item): void {
    this.#queued.push(item);
    if (this.#queued.length === 1) afterPromiseJobs(this.#dispatchQueued);
  }

  readonly #dispatchQueued = (): void => {
    const queued = this.#queued;
    this.#queued = [];
    void this.#dispatch(queued);
  };

  /**
   * One dispatch: the keys missed in this tick by every loader and getOrCompute, read in one
   * store call (the double-check: a value written since the caller's own read is not
   * recomputed), then locked in one call and filled, each source in its own batches.
   */
  async #dispatch(queued: Item[]): Promise<void> {
    const items = queued.filter((item) => !item.flight.abandoned);
    if (items.length === 0) return;
    const versioned = this.#store.tagVersions !== undefined && items.some((item) => item.tags !== undefined);
    // Tag versions are read with the entries (same tick, in parallel) and BEFORE any fill: a fill
    // records them, so an invalidation landing during the fill makes its write a miss.
    const [entries] = await Promise.all([this.#read(items), versioned ? this.#readTagVersions(items) : undefined]);
    const now = this.#clock.now();
    const toFill: Item[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const entry = entries[i];
      const source = item.source;
      if (item.flight.abandoned) continue;
      if (entry !== undefined && usable(item, entry, now)) {
        this.#settleFromStore(item, entry.value);
        if (!item.flight.background) {
          this.#record(source, 'hits', item.key, item.sink);
          if (item.policy.beta > 0 && refreshEarly(entry, now, item.policy.beta)) this.#refresh(source, item.key, item.arg, item.policy, entry.freshUntil);
        }
      } else if (entry !== undefined && now < entry.staleUntil && !item.flight.background && tagsValid(item, entry)) {
        this.#record(source, 'staleServed', item.key, item.sink);
        this.#settleFromStore(item, entry.value);
        this.#refresh(source, item.key, item.arg, item.policy, entry.freshUntil);
      } else {
        if (!item.flight.background) this.#record(source, 'misses', item.key, item.sink);
        toFill.push(item);
      }
    }
    if (toFill.length === 0) return;
    const locking = this.#store.lock !== undefined ? toFill.filter((item) => item.policy.lock) : [];
    const unlocked = locking.length === toFill.length ? [] : locking.length === 0 ? toFill : toFill.filter((item) => !item.policy.lock);
    await Promise.all([this.#fill(unlocked, undefined), locking.length > 0 ? this.#lockAndFill(locking) : undefined]);
  }

  /** Sets each tagged item's `versions`; NaN where unknown (the store failed): never valid, never written. */
  async #readTagVersions(items: Item[]): Promise<void> {
    const unique = [...new Set(items.flatMap((item) => item.tags ?? []))];
    const versions = await this.#storeCall('tagVersions', () => this.#store.tagVersions!(unique), items);
    const byTag = new Map<string, number>();
    if (versions !== undefined) for (let i = 0; i < unique.length; i++) byTag.set(unique[i]!, versions[i]!);
    for (const item of items) if (item.tags !== undefined) item.versions = item.tags.map((tag) => byTag.get(tag) ?? NaN);
  }

  async #read(items: Item[]): Promise<(Entry | undefined)[]> {
    const getSync = this.#getSync;
    if (getSync !== undefined) return items.map((item) => getSync(item.key));
    const entries = await this.#storeCall('getMany', () => this.#store.getMany(items.map((item) => item.key)), items);
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
    const token = `${this.#tokenPrefix}.${++this.#tokenSeq}`;
    const { lockTtl, lockPollInterval, lockWaitTimeout } = this.#timing;
    const deadline = this.#clock.now() + lockWaitTimeout;
    const fills: Promise<void>[] = [];
    let waiting = items;
    let delay = lockPollInterval;
    for (let attempt = 0; ; attempt++) {
      const attempts = await this.#storeCall('lock.acquire', () => lock.acquire(waiting.map((item) => item.key), token, lockTtl), waiting);
      if (attempts === undefined) {
        // The store is unreachable: fill without the lock rather than wait on it.
        fills.push(this.#fill(waiting, undefined));
        break;
      }
      const won: Item[] = [];
      const release: string[] = [];
      const next: Item[] = [];
      const now = this.#clock.now();
      for (let i = 0; i < waiting.length; i++) {
        const item = waiting[i]!;
        const source = item.source;
        const result: LockAttempt | undefined = attempts[i];
        if (result?.won) source.counters.lockAcquired++;
        if (item.flight.abandoned) {
          if (result?.won) release.push(item.key);
        } else if (result?.entry !== undefined && usable(item, result.entry, now)) {
          // Re-check after acquiring: another process wrote it since our read.
          if (result.won) release.push(item.key);
          this.#settleFromStore(item, result.entry.value);
        } else if (result === undefined || result.won) {
          won.push(item);
        } else if (item.flight.background && result.entry !== undefined) {
          // Another process refreshes this key: keep serving the stale value it replaces.
          if (attempt === 0) this.#count(source, 'lockContended', item.sink);
          this.#settleFromStore(item, result.entry.value);
        } else {
          if (attempt === 0) this.#count(source, 'lockContended', item.sink);
          next.push(item);
        }
      }
      if (release.length > 0) void this.#storeCall('lock.release', () => lock.release(release, token), waiting);
      if (won.length > 0) fills.push(this.#fill(won, token));
      waiting = next;
      if (waiting.length === 0) break;
      const left = deadline - this.#clock.now();
      if (left <= 0) {
        // Bounded damage, never unavailability: stop waiting on the other process and fill here.
        for (const item of waiting) this.#count(item.source, 'lockTimeouts', item.sink);
        fills.push(this.#fill(waiting, undefined));
        break;
      }
      // Never sleep past the deadline; the last poll lands on it.
      await this.#sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, DEFAULTS.lockPollCap);
      waiting = waiting.filter((item) => !item.flight.abandoned);
      if (waiting.length === 0) break;
    }
    await Promise.all(fills);
  }

  /** Runs each source's function for its items (in its groups), writes what succeeded, settles all. */
  async #fill(all: Item[], token: string | undefined): Promise<void> {
    // A flight abandoned before its fill starts is not filled; its lock is released.
    const items = all.filter((item) => !item.flight.abandoned);
    if (token !== undefined && items.length < all.length) {
      const lock = this.#store.lock!;
      const dropped = all.filter((item) => item.flight.abandoned);
      void this.#storeCall('lock.release', () => lock.release(dropped.map((item) => item.key), token), dropped);
    }
    if (items.length === 0) return;
    const bySource = new Map<Source, Item[]>();
    for (const item of items) {
      const list = bySource.get(item.source);
      if (list === undefined) bySource.set(item.source, [item]);
      else list.push(item);
    }
    const runs: Promise<void>[] = [];
    for (const [source, list] of bySource) for (const group of source.groups(list)) runs.push(this.#fillGroup(source, group, token));
    await Promise.all(runs);
  }

  async #fillGroup(source: Source, items: Item[], token: string | undefined): Promise<void> {
    const run = new FillRun(items.length);
    for (const item of items) item.flight.run = run;
    const started = performance.now();
    const startedAt = this.#clock.now();
    let results: unknown[];
    try {
      results = await source.run(items, run.signal);
    } catch (thrown) {
      const failure = new Failure(asError(thrown));
      results = items.map(() => failure);
    }
    const duration = performance.now() - started;
    const now = this.#clock.now();
    const writes: StoreWrite[] = [];
    const release: string[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const result = results[i];
      const failed = result instanceof Failure;
      this.#count(source, failed ? 'fillFailures' : 'fills', item.sink);
      this.#hook('onFill', item.key, source.name, duration, failed ? result.error : undefined);
      if (item.flight.abandoned) {
        // Invalidated or cleared while filling (or nobody wants it): the result may be stale.
        if (token !== undefined) release.push(item.key);
      } else if (failed) {
        // Errors are never cached: the next caller retries.
        if (token !== undefined) release.push(item.key);
        this.#flights.fail(item.flight, result.error);
      } else if (result === undefined) {
        if (token !== undefined) release.push(item.key);
        this.#flights.resolve(item.flight, undefined);
      } else {
        this.#flights.resolve(item.flight, result);
        // Tags whose versions could not be read: the value is served but not cached.
        if (item.versions !== undefined && item.versions.some(Number.isNaN)) {
          if (token !== undefined) release.push(item.key);
          continue;
        }
        const entry = makeEntry(result, now, item.policy, {
          fillMs: item.policy.beta > 0 ? now - startedAt : undefined,
          tags: item.tags,
          tagVersions: item.versions,
        });
        writes.push({ key: item.key, entry, ttl: physicalTtl(entry, now) });
      }
    }
    const lock = this.#store.lock;
    if (release.length > 0 && lock !== undefined && token !== undefined) {
      void this.#storeCall('lock.release', () => lock.release(release, token), items);
    }
    if (writes.length > 0) {
      // Issued in the same synchronous step as the resolves above: a caller that misses the
      // freed flight reads after this write (memory: applied already; Redis: same connection,
      // commands in order). With a lock, the write lands only if our lock still stands.
      if (lock !== undefined && token !== undefined) await this.#storeCall('lock.writeAndRelease', () => lock.writeAndRelease(writes, token), items);
      else await this.#storeCall('setMany', () => this.#store.setMany(writes), items);
    }
  }

  // ── bookkeeping ────────────────────────────────────────────────────────────────────────

  /**
   * Calls the store; a failure is counted (once for each source it affected, or under
   * getOrCompute for calls of no source) and reported, and the load goes on without it.
   */
  async #storeCall<T>(operation: string, call: () => Promise<T>, affected?: Source | readonly Item[]): Promise<T | undefined> {
    try {
      return await call();
    } catch (error) {
      if (affected === undefined) this.#counters.of(GET_OR_COMPUTE).storeErrors++;
      else if (!Array.isArray(affected)) (affected as Source).counters.storeErrors++;
      else for (const source of new Set((affected as readonly Item[]).map((item) => item.source))) source.counters.storeErrors++;
      this.#hook('onStoreError', error, operation);
      return undefined;
    }
  }

  #storeProblem(counter: CounterName, key: string, error: unknown, operation: string): void {
    const loaderName = key.slice(0, key.indexOf(':'));
    const source = this.#loaders.has(loaderName) ? loaderName : GET_OR_COMPUTE;
    this.#counters.count(source, counter, 1);
    this.#hook('onStoreError', error, `${operation} ${key}`);
  }

  /** #record for a hit, kept small so it inlines into the hit path. */
  #hit(source: Source, key: string, sink: Sink | undefined): void {
    source.counters.hits++;
    if (sink !== undefined) sink.count(source.name, 'hits', 1);
    const hook = this.#hooks.onHit;
    if (hook !== undefined) this.#record(source, 'hits', key, undefined, true);
  }

  #record(source: Source, counter: 'hits' | 'misses' | 'coalesced' | 'staleServed', key: string, sink: Sink | undefined, hookOnly = false): void {
    if (!hookOnly) {
      source.counters[counter]++;
      if (sink !== undefined) sink.count(source.name, counter, 1);
    }
    const hooks = this.#hooks;
    const hook = counter === 'hits' ? hooks.onHit : counter === 'misses' ? hooks.onMiss : counter === 'coalesced' ? hooks.onCoalesced : hooks.onStale;
    if (hook !== undefined) {
      try {
        hook(key, source.name);
      } catch {
        // A throwing observer must not fail the load it observes.
      }
    }
  }

  #count(source: Source, counter: CounterName, sink: Sink | undefined): void {
    source.counters[counter]++;
    if (sink !== undefined) sink.count(source.name, counter, 1);
  }

  #hook<N extends 'onFill' | 'onStoreError'>(name: N, ...args: Parameters<NonNullable<CacheHooks[N]>>): void {
    const hook = this.#hooks[name] as ((...a: unknown[]) => void) | undefined;
    if (hook === undefined) return;
    try {
      hook(...args);
    } catch {
      // Observers never break loads.
    }
  }

  #labelSource(label: string): Source {
    let source = this.#labelSources.get(label);
    if (source === undefined) {
      if (typeof label !== 'string' || label.length === 0 || this.#loaders.has(label)) {
        throw invalidOption('label', label, 'a non-empty string that is not a loader name');
      }
      source = { ...this.#gocSource, name: label, counters: this.#counters.of(label) };
      this.#labelSources.set(label, source);
    }
    return source;
  }

  #assertOpen(): void {
    if (this.#closed) throw new HerdcacheError('E_CLOSED', 'herdcache: the cache is closed');
  }
}

const HOOK_NAMES = ['onHit', 'onMiss', 'onStale', 'onCoalesced', 'onFill', 'onStoreError'] as const;

/** One hooks object calling every set's hook in turn; a throwing observer does not silence the next. */
function fanOutHooks(sets: readonly CacheHooks[]): CacheHooks {
  const out: Record<string, (...args: unknown[]) => void> = {};
  for (const name of HOOK_NAMES) {
    const fns = sets.map((set) => set[name] as ((...args: unknown[]) => void) | undefined).filter((fn) => typeof fn === 'function');
    if (fns.length === 0) continue;
    out[name] = (...args) => {
      for (const fn of fns) {
        try {
          fn!(...args);
        } catch {
          // Observers never break loads, nor each other.
        }
      }
    };
  }
  return out as CacheHooks;
}

/**
 * Whether a stored entry answers this item: fresh, and for a background refresh newer than the
 * entry it was started to replace (an early refresh must not stop at the still-fresh original).
 */
function usable(item: Item, entry: Entry, now: number): boolean {
  return now < entry.freshUntil && (item.replaces === undefined || entry.freshUntil > item.replaces) && tagsValid(item, entry);
}

/**
 * On a tag-versioned store, an entry answers an item only if it carries the same tags at the
 * versions just read; anything else (invalidated since, written before tags were set) is a miss.
 */
function tagsValid(item: Item, entry: Entry): boolean {
  const versions = item.versions;
  if (versions === undefined) return true; // no tags, or a store that enforces them itself
  const tags = item.tags!;
  const entryTags = entry.tags;
  const entryVersions = entry.tagVersions;
  if (entryTags === undefined || entryVersions === undefined || entryTags.length !== tags.length) return false;
  for (let i = 0; i < tags.length; i++) {
    if (entryTags[i] !== tags[i] || entryVersions[i] !== versions[i]) return false;
  }
  return true;
}

function maxRefreshesOption(value: unknown): number {
  return checkPositiveInteger('maxRefreshes', value);
}

export function checkKey(key: unknown, name: string): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new HerdcacheError('E_INVALID_KEY', `herdcache: argument "${name}" must be a non-empty string, got ${describe(key)}`);
  }
}

async function runFill(item: Item, signal: AbortSignal): Promise<unknown[]> {
  try {
    const value = await (item.arg as Fill<unknown>)({ key: item.key, signal });
    return [value];
  } catch (thrown) {
    return [new Failure(asError(thrown))];
  }
}

/** Creates a registry. One per process is the intended use; two never coalesce with each other. */
export function createCache(options?: CacheOptions): Cache {
  return new Cache(options);
}

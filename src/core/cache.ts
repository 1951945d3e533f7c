/**
 * createCache(): the process-wide registry that ties the store, the in-flight fills, the
 * loaders and the metrics together.
 *
 * A load travels: request scope (memo) → registry (hit? in flight? else queue) → one store
 * read for the keys missed in this tick → fill locks for what is still missing → the user's
 * fill/batch function for exactly the keys this process won → fenced write → every waiter.
 */
import { HerdcacheError, invalidArgument, invalidOption } from './errors';
import { rejected } from './flight';
import { FlightTable } from './flight-table';
import { type Clock, CoarseClock, type Entry, systemClock } from './freshness';
import { Observers, notify } from './hooks';
import { Invalidation } from './invalidation';
import { LoadPath } from './load-path';
import { boundedKey } from './long-keys';
import { Loader } from './loader';
import { NoTtlWarnings } from './no-ttl';
import { runsApart } from './runs-apart';
import { record } from './load-counts';
import { CounterSet, type CounterName, type Sink, countOn } from './metrics';
import {
  CACHE_OPTIONS,
  DEFAULTS,
  LOADER_OPTIONS,
  REQUEST_OPTIONS,
  type Policy,
  checkGetOrComputeKeys,
  type Resolved,
  holdsValues,
  reusable,
  checkClock,
  checkKnownKeys,
  checkPositiveInteger,
  checkSignal,
  resolveLockTiming,
  resolvePolicy,
} from './options';
import type { Source } from './item';
import { StoreCalls } from './store-calls';
import type { Computation, Registry } from './registry';
import { RequestScope } from './scope';
import { Sources } from './sources';
import { memoryStore } from './memory';
import { checkKey, checkRawKey, isNamespacedKey } from './namespaces';
import type { Store, StoreSlot, StoreWrite } from './store';
import type {
  CacheHooks,
  CacheOptions,
  Fill,
  GetOrComputeOptions,
  LoaderOptions,
  MetricsSnapshot,
  RequestOptions,
} from './types';

function realSleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

let registryIds = 0;

export class Cache implements Registry {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #policy: Policy;
  readonly #observers: Observers;
  readonly #flights = new FlightTable();
  readonly #counters = new CounterSet();
  readonly #sources = new Sources(this.#counters);
  readonly #loads: LoadPath;
  #recent: Resolved<Computation> | undefined; // the last getOrCompute options resolved, by value (see #computationOf)
  /** Every store call goes through it: a failing store is counted, never fails a call. */
  readonly #storeCalls: StoreCalls;
  readonly #noTtl: NoTtlWarnings;
  /** invalidate, invalidateTags, clear, prime: what abandons fills in flight. */
  readonly #invalidation: Invalidation;

  constructor(options: CacheOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    checkKnownKeys('createCache()', options, CACHE_OPTIONS);
    const store: Store = options.store === undefined ? memoryStore() : options.store; // null is refused below
    if (
      store === null ||
      typeof store !== 'object' ||
      typeof store.getMany !== 'function' ||
      typeof store.setMany !== 'function'
    ) {
      throw invalidOption('store', store, 'a Store (memoryStore(), redisStore(...))');
    }
    this.#store = store;
    this.#noTtl = new NoTtlWarnings(store.name, this.#sources.getOrCompute);
    const clock = options.clock === undefined ? systemClock : checkClock(options.clock);
    this.#clock = clock;
    const hasLock = store.lock !== undefined;
    // `lock: true` on a store without a lock is harmless: the pipeline only locks where a lock exists.
    // A store other than the in-process memory store keeps values for other processes: a cache
    // given one and no ttl most likely forgot it (coalesce-only stores nothing): loads say so once.
    const ttlUnset = options.ttl === undefined && store.name !== 'memory' ? { ttlUnset: true } : undefined;
    this.#policy = resolvePolicy(options, {
      ttl: DEFAULTS.ttl,
      swr: DEFAULTS.swr,
      jitter: DEFAULTS.jitter,
      lock: hasLock,
      beta: 0,
      ...ttlUnset,
    });
    const timing = resolveLockTiming(options);
    const maxRefreshes =
      options.maxRefreshes === undefined
        ? DEFAULTS.maxRefreshes
        : checkPositiveInteger('maxRefreshes', options.maxRefreshes);
    this.#observers = new Observers(options.hooks);
    this.#storeCalls = new StoreCalls(this.#sources.getOrCompute.counters, this.#observers);
    this.#invalidation = new Invalidation(store, clock, this.#flights, this.#counters, this.#storeCalls);
    this.#loads = new LoadPath({
      store,
      clock,
      // No clock given: hits read a coarse one (Date.now() at most once per ms and per 32 hits).
      hitClock: options.clock === undefined ? new CoarseClock() : clock,
      sleep: clock.sleep?.bind(clock) ?? realSleep,
      flights: this.#flights,
      observers: this.#observers,
      maxRefreshes,
      timing,
      tokenPrefix: `${process.pid}.${++registryIds}.${Math.random().toString(36).slice(2, 10)}`,
      storeCalls: this.#storeCalls,
    });
    store.bind?.({
      encodeError: (key, error) => this.#storeProblem('encodeErrors', key, error, 'encode'),
      decodeError: (key, error) => this.#storeProblem('decodeErrors', key, error, 'decode'),
      // Another replica invalidated: a caller arriving after the news must not join a fill here
      // that started before it.
      remoteInvalidation: (keys, tags, all) =>
        this.#invalidation.abandon(keys, tags, all, 'another replica invalidated this value while it was filled'),
    });
  }

  /** Fills in flight in this process, the response layer's solo runs included (for tests and leak checks). */
  get inFlight(): number {
    return this.#flights.size + runsApart(this);
  }

  /**
   * Invalidations the store failed to take (down, timed out, breaker open), sent again until it
   * takes them: keys, tags, and whether a clear is among them. All 0/false when the store is well.
   */
  get pendingInvalidations(): { readonly keys: number; readonly tags: number; readonly clear: boolean } {
    return this.#invalidation.pending;
  }

  /**
   * Reads `key`, or computes it with `fill` once per process however many callers miss at
   * once. A `null` result is cached; `undefined` is returned but not cached.
   */
  getOrCompute<V>(key: string, fill: Fill<V>, options?: GetOrComputeOptions): Promise<V> {
    // The common call (no options) skips option resolution: the hit path stays a lookup.
    // (A key starting with U+0000 is in herdcache's own namespaces: refused below, see ./namespaces.)
    if (typeof key === 'string' && key.length > 0 && !isNamespacedKey(key) && typeof fill === 'function') {
      if (options === undefined)
        return this._load<V>(this.#sources.getOrCompute, key, fill, this.#policy, undefined, undefined);
      return this.#withOptions(key, fill, options);
    }
    return this._getOrCompute(key, fill, options, undefined);
  }

  /**
   * getOrCompute with options, for a valid key and fill. A method of its own, so getOrCompute stays
   * small enough for the caller to inline the whole hit path of a call without options, and this
   * one gets its own budget to inline that path too. Options holding the values of the last
   * resolution (a new `{ ttl }` per call, most often) reuse it, with nothing resolved again.
   */
  #withOptions<V>(key: string, fill: Fill<V>, options: GetOrComputeOptions): Promise<V> {
    const recent = reusable(options, this.#recent);
    if (recent !== undefined) return this._load<V>(recent.source, key, fill, recent.policy, undefined, undefined);
    return this._getOrCompute(key, fill, options, undefined);
  }

  /** @internal getOrCompute on behalf of a request scope. */
  _getOrCompute<V>(
    key: string,
    fill: Fill<V>,
    options: GetOrComputeOptions | undefined,
    sink: Sink | undefined,
  ): Promise<V> {
    try {
      checkRawKey(key, 'key');
      if (typeof fill !== 'function') throw invalidArgument('fill', fill, 'a function');
      checkSignal(options);
      if (options !== undefined) checkGetOrComputeKeys('getOrCompute()', options);
      const { source, policy } = options === undefined ? this._computation(undefined) : this.#computationOf(options);
      return this._load<V>(source, key, fill, policy, options?.signal, sink);
    } catch (error) {
      return rejected(error);
    }
  }

  /**
   * @internal getOrCompute's options resolved into a source and a policy, validated: once per
   * @cached field at build time, so its calls resolve nothing.
   */
  _computation(options: Omit<GetOrComputeOptions, 'signal'> | undefined): Computation {
    if (options === undefined) return { source: this.#sources.getOrCompute, policy: this.#policy };
    let policy = resolvePolicy(options, this.#policy);
    if (options.tags !== undefined) policy = { ...policy, tags: this.#invalidation.checkTags('tags', options.tags) };
    const label = options.label;
    return { source: label === undefined ? this.#sources.getOrCompute : this.#sources.label(label), policy };
  }

  /**
   * A call's options resolved: the last resolution is reused while a call's options hold the same
   * values (compared one by one on every call, so a mutated or new options object never gets a
   * stale policy; tags, an array, are resolved on every call).
   */
  #computationOf(options: GetOrComputeOptions): Computation {
    if (options.tags !== undefined) return this._computation(options);
    const recent = this.#recent;
    if (recent !== undefined && holdsValues(options, recent)) return recent.computation;
    const { ttl, swr, jitter, lock, earlyRefresh, label } = options;
    const given = { ttl, swr, jitter, lock, earlyRefresh, label };
    const computation = this._computation(given);
    this.#recent = { ...given, computation };
    return computation;
  }

  /** A batching loader shared by every request of this process. Names are unique per registry. */
  loader<K, V>(options: LoaderOptions<K, V>): Loader<K, V> {
    this.#assertOpen();
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    checkKnownKeys('cache.loader()', options, LOADER_OPTIONS);
    return this.#sources.addLoader(
      options.name,
      (name) => new Loader<K, V>(this, options, resolvePolicy(options, this.#policy), this.#counters.of(name)),
    );
  }

  /** @internal The registry clock's time (the response layer dates its entries with it). */
  _now(): number {
    return this.#clock.now();
  }

  /**
   * A per-request view: DataLoader memo semantics for one operation, the registry underneath.
   * `signal`: the request's own (the client left): every load of the request stops waiting when
   * it fires, and a fill nobody else waits on is told to stop.
   */
  request(options?: RequestOptions): RequestScope {
    if (options === undefined) return new RequestScope(this, undefined);
    checkSignal(options);
    checkKnownKeys('cache.request()', options, REQUEST_OPTIONS);
    return new RequestScope(this, options.signal);
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
    if (hooks === null || typeof hooks !== 'object')
      throw invalidArgument('hooks', hooks, 'an object of hook functions');
    return this.#observers.add(hooks);
  }

  /**
   * Removes `key` (a getOrCompute key, or a loader's `name:key`) from the store. A fill of it
   * already in flight is abandoned: its result is not written, and its waiters start over.
   */
  async invalidate(key: string | readonly string[]): Promise<void> {
    const keys = typeof key === 'string' ? [key] : key;
    if (!Array.isArray(keys)) throw invalidArgument('key', key, 'a string or an array of strings');
    for (const k of keys) checkKey(k, 'key');
    await this._invalidate(keys, this.#sources.getOrCompute.name);
  }

  /** @internal */
  _invalidate(keys: readonly string[], source: string, stored = true): Promise<void> {
    return this.#invalidation.keys(keys, source, stored);
  }

  /**
   * Makes every entry carrying one of `tags` a miss, on every replica sharing the store, and
   * abandons the fills of tagged values in flight here (their results are not written; their
   * waiters start over). No scan of the keyspace: see the store's invalidateTags.
   */
  invalidateTags(tags: readonly string[]): Promise<void> {
    return this.#invalidation.tags(tags, this.#sources.getOrCompute.name);
  }

  /** @internal validates tags and that the store can invalidate them. */
  _checkTagsSupported(option: string): void {
    this.#invalidation.checkTagsSupported(option);
  }

  /** @internal writes a value into the shared store now, with its tags (loader.prime). */
  _write(
    source: Source,
    key: string,
    value: unknown,
    policy: Policy,
    tags: readonly string[] | undefined,
  ): Promise<void> {
    return this.#invalidation.prime(source, key, value, policy, tags);
  }

  /** Empties the store and abandons every fill in flight (their waiters start over). */
  clear(): Promise<void> {
    return this.#invalidation.clear();
  }

  /** Abandons fills in flight, rejects later misses and new loaders, closes the store if it can. */
  async close(): Promise<void> {
    this.#loads.closed = true;
    this.#invalidation.abandon([], [], true, 'the cache was closed while this fill ran', false);
    this.#invalidation.close();
    await this.#store.close?.();
  }

  // ── the load path (see LoadPath) ───────────────────────────────────────────────────────
  // Every key enters it bounded: a long key is held (in flight, in the store) as its digest.

  /** @internal Registry */
  _load<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    own?: boolean,
  ): Promise<V> {
    if (policy.ttlUnset === true) this.#noTtl.warn(source, key);
    return this.#loads.load<V>(source, boundedKey(key), arg, policy, signal, sink, own);
  }

  /** @internal Registry */
  _peek(source: Source, key: string, arg: unknown, policy: Policy, sink?: Sink, slot?: StoreSlot): Entry | undefined {
    return this.#loads.peek(source, slot === undefined ? boundedKey(key) : slot.stored, arg, policy, sink, slot);
  }

  /** @internal The response layer's solo runs (graphql/response-solo): nothing of `key` held (LoadPath.soloFree). */
  _soloFree(key: string): boolean {
    return this.#loads.soloFree(boundedKey(key));
  }

  /** @internal What a solo run's flight would have counted and told the hooks (a fill: its duration). */
  _soloCount(source: Source, counter: 'misses' | 'coalesced' | 'fills', key: string, durationMs: number): void {
    if (counter !== 'fills') return record(this.#observers, source, counter, boundedKey(key), undefined);
    countOn(source, counter, undefined);
    const hook = this.#observers.current.onFill; // its arguments made only when it is set
    if (hook !== undefined) notify(hook, [boundedKey(key), source.name, durationMs, undefined]);
  }

  /** @internal A solo run's result, written as a fill's is without the lock; false: larger than the store keeps. */
  _soloWrite(source: Source, write: StoreWrite): boolean {
    if (this.#store.keeps?.(write.key, write.entry) === false) return false;
    void this.#storeCalls.call('setMany', () => this.#store.setMany([write]), source);
    return true;
  }

  /** @internal Invalidations (keys, tags, clears, close) applied so far in this process: a solo run's fence. */
  _invalidations(): number {
    return this.#storeCalls.outage.invalidations;
  }

  /** @internal Registry */
  _loadAlone<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
  ): Promise<V> {
    return this.#loads.loadAlone<V>(source, boundedKey(key), arg, policy, signal, sink);
  }

  // ── bookkeeping ────────────────────────────────────────────────────────────────────────

  #storeProblem(counter: CounterName, key: string, error: unknown, operation: string): void {
    this.#counters.count(this.#sources.nameOfKey(key), counter, 1);
    notify(this.#observers.current.onStoreError, [error, `${operation} ${key}`]);
  }

  #assertOpen(): void {
    if (this.#loads.closed) throw new HerdcacheError('E_CLOSED', 'herdcache: the cache is closed');
  }
}

/** Creates a registry. One per process is the intended use; two never coalesce with each other. */
export function createCache(options?: CacheOptions): Cache {
  return new Cache(options);
}

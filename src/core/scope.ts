/**
 * The per-request view. Within one operation the same key gives the same answer (the memo
 * holds the first promise), even if the shared entry is refreshed mid-request; underneath,
 * loads go through the registry, so concurrent requests still share fills and batches.
 *
 * `load`, `loadMany`, `prime`, `clear` and `clearAll` of a scoped loader behave as DataLoader
 * documents: prime keeps an existing entry, clear forgets the request's memo only, a key that
 * failed inside a batch result stays failed for the request, and a whole-batch failure is
 * forgotten so the next load retries.
 */
import type { Entry } from './freshness';
import { invalidArgument, invalidOption } from './errors';
import { PENDING_OR_UNKNOWN, Rejection, fulfilled, outcomeOf, raceAbort, rejected } from './flight';
import { type Loader, batchFailures, loadEach } from './loader';
import { checkSignal } from './options';
import { CounterSet, type CounterName, type Sink } from './metrics';
import { type Computation, NO_ARG, type Registry } from './registry';
import { type BatchScheduleFn, afterPromiseJobs, scheduleOnce } from './tick';
import type { Fill, GetOrComputeOptions, LoadOptions, MetricsSnapshot } from './types';

/**
 * One memoized load of a request whose first caller came with a signal. Each caller may leave
 * with its own signal without disturbing the others; the registry is told to stop waiting only
 * when every caller that came with a signal has left and none came without one. (A load whose
 * first caller had no signal is memoized as its promise: nothing can abandon it.)
 */
class Shared<V> {
  readonly promise: Promise<V>;
  readonly #controller = new AbortController();
  /** A caller without a signal wants the value to the end. */
  #pinned = false;
  /** Callers with a signal still waiting. */
  #waiting = 0;

  constructor(start: (signal: AbortSignal | undefined) => Promise<V>) {
    this.promise = start(this.#controller.signal);
  }

  /** Every caller with a signal left before the value came: the registry load was abandoned. */
  get abandoned(): boolean {
    return this.#controller.signal.aborted;
  }

  join(signal: AbortSignal | undefined): Promise<V> {
    if (signal === undefined) {
      this.#pinned = true;
      return this.promise; // the same promise for every such caller, as DataLoader
    }
    if (signal.aborted) return Promise.reject(signal.reason);
    this.#waiting++;
    return raceAbort(this.promise, signal, () => {
      if (--this.#waiting === 0 && !this.#pinned) this.#controller.abort(signal.reason);
    });
  }
}

/**
 * What a request remembers for a key: the entry it was answered from synchronously (or a primed
 * value), the promise of a load whose first caller had no signal, or a Shared load.
 */
type Held<V> = Entry<V> | Promise<V> | Shared<V>;

/** Nothing held for the key: the caller goes to the registry. */
const NOTHING: unique symbol = Symbol('herdcache.nothing');

/**
 * The request's answer for `key` if it has one. `sync`: a value when it is known (a synchronous
 * hit, a prime, a load that has settled), else a promise; otherwise always a promise. A held load
 * that failed in a way `forget` accepts is dropped here, when next looked at, rather than by a
 * handler per load: the next caller retries.
 */
function held<V>(memo: Map<string, Held<V>>, key: string, signal: AbortSignal | undefined, forget: (error: unknown) => boolean, sync: boolean): V | Promise<V> | typeof NOTHING {
  const answer = memo.get(key);
  if (answer === undefined) return NOTHING;
  if (answer instanceof Shared) return answer.join(signal);
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (answer instanceof Promise) {
    const outcome = outcomeOf(answer);
    if (outcome instanceof Rejection) {
      if (forget(outcome.error)) {
        memo.delete(key);
        return NOTHING;
      }
    } else if (sync && outcome !== PENDING_OR_UNKNOWN) {
      return outcome as V;
    }
    return signal === undefined ? answer : raceAbort(answer, signal, ignore);
  }
  return sync ? answer.value : fulfilled(answer);
}

function ignore(): void {}

/** Memoizes the registry load `start` under `key` for the request, or joins the one it holds. */
function memoized<V>(memo: Map<string, Held<V>>, key: string, signal: AbortSignal | undefined, start: (signal: AbortSignal | undefined) => Promise<V>, forget: (error: unknown) => boolean): Promise<V> {
  const answer = held(memo, key, signal, forget, false);
  if (answer !== NOTHING) return answer as Promise<V>;
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (signal === undefined) {
    const promise = start(undefined);
    memo.set(key, promise);
    return promise;
  }
  const shared = new Shared(start);
  memo.set(key, shared);
  shared.promise.catch((error: unknown) => {
    if ((shared.abandoned || forget(error)) && memo.get(key) === shared) memo.delete(key);
  });
  return shared.join(signal);
}

/** Per-key Errors returned by a batch stay memoized (DataLoader); anything else is forgotten. */
function forgetUnlessKeyError(error: unknown): boolean {
  return !(error instanceof Error) || batchFailures.has(error);
}

const forgetAlways = () => true;

/** DataLoader's cacheMap: any object with Map's get, set, delete and clear. */
export interface CacheMapLike<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): unknown;
  delete(key: K): unknown;
  clear(): unknown;
}

/** DataLoader's memo options, for one scoped loader. */
export interface ScopedLoaderOptions<V> {
  /**
   * `false`: no memo, as DataLoader's `cache: false`: every load reaches the batch function, even
   * a key repeated in one tick, and bypasses the shared store and cross-request single-flight
   * (joining another request's fill would be a memo by another name). Default true.
   */
  cache?: boolean;
  /** The memo, keyed by the key function's string: a Map-like of promises, or `null` for none (= `cache: false`). Default `new Map()`. */
  cacheMap?: CacheMapLike<string, Promise<V>> | null;
}

const MEMO_METHODS = ['get', 'set', 'delete', 'clear'] as const;

function memoOf<V>(options: ScopedLoaderOptions<V> | undefined): CacheMapLike<string, Promise<V>> | null {
  if (options === undefined) return new Map();
  if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
  const { cache, cacheMap } = options;
  if (cache !== undefined && typeof cache !== 'boolean') throw invalidOption('cache', cache, 'a boolean');
  if (cache === false || cacheMap === null) return null;
  if (cacheMap === undefined) return new Map();
  const missing = MEMO_METHODS.filter((m) => typeof (cacheMap as unknown as Record<string, unknown> | undefined)?.[m] !== 'function');
  if (missing.length > 0) throw invalidOption('cacheMap', cacheMap, `null or an object with get, set, delete and clear (missing: ${missing.join(', ')})`);
  return cacheMap;
}

/**
 * The tick a load belongs to: a number bumped once per tick for the whole process (one scheduled
 * job per tick, however many request scopes load in it), so a scoped loader can tell "the loads of
 * this tick" apart without scheduling anything of its own.
 */
let tick = 0;
let tickEnding = false;

function endTick(): void {
  tick++;
  tickEnding = false;
}

function currentTick(): number {
  if (!tickEnding) {
    tickEnding = true;
    afterPromiseJobs(endTick);
  }
  return tick;
}

/**
 * The memo hits of one scoped loader in one tick, waiting for the loads of that tick (DataLoader's
 * pending batch): they are answered when the batch leaves (the loader's schedule) and its loads
 * have settled, so a request's cached and uncached values arrive together and the loads they lead
 * to share the next batch, as in DataLoader >= 2.1. Made only when a hit happens: loads pay an
 * array push each, no handler and no scheduling.
 */
class PendingHits {
  released = false;
  readonly #answers: (() => void)[] = [];

  constructor(schedule: BatchScheduleFn, loads: readonly Promise<unknown>[]) {
    scheduleOnce(schedule, () => {
      if (loads.length === 0) this.#release();
      else void Promise.allSettled(loads).then(this.#release);
    });
  }

  wait<V>(answer: Promise<V>): Promise<V> {
    if (this.released) return answer.then(passThrough); // a scheduler that called back at once
    return new Promise<V>((resolve) => this.#answers.push(() => resolve(answer)));
  }

  readonly #release = (): void => {
    this.released = true;
    for (const answer of this.#answers) answer();
  };
}

function passThrough<V>(value: V): V {
  return value;
}

export class ScopedLoader<K, V> implements Sink {
  readonly #loader: Loader<K, V>;
  readonly #scope: RequestScope;
  /** The request memo: key string → the promise of its load (recorded: see outcomeOf). null: none. */
  readonly #memo: CacheMapLike<string, Promise<V>> | null;
  /** Memo entries whose first caller came with a signal: who still waits, to abandon when all left. */
  #shared: WeakMap<Promise<V>, Shared<V>> | undefined = undefined;
  /** The tick of `#loads` and `#hits`. */
  #tick = -1;
  /** This tick's loads that went to the registry (a pending hit waits for them). */
  #loads: Promise<unknown>[] | undefined = undefined;
  #hits: PendingHits | undefined = undefined;

  /** @internal use scope.loader(loader, options?) */
  constructor(loader: Loader<K, V>, scope: RequestScope, options?: ScopedLoaderOptions<V>) {
    this.#loader = loader;
    this.#scope = scope;
    this.#memo = memoOf(options);
  }

  get name(): string {
    return this.#loader.name;
  }

  /** @internal Sink: batch and key functions get this scoped loader as `this`. */
  get holder(): object {
    return this;
  }

  /** @internal Sink: counts go to the request's stats. */
  count(source: string, counter: CounterName, n: number): void {
    this.#scope.count(source, counter, n);
  }

  /**
   * One value, memoized for the request. As DataLoader's: null or undefined (and here, a key the
   * key function maps to no string) throws a TypeError at once; a cache hit resolves together with
   * the batch pending in this tick; a rejection nobody handles is an unhandled rejection.
   */
  load(key: K, options?: LoadOptions): Promise<V> {
    const keyString = this.#loader._keyString(key, this);
    let signal: AbortSignal | undefined;
    if (options !== undefined) {
      try {
        checkSignal(options);
      } catch (error) {
        return Promise.reject(error);
      }
      signal = options.signal;
    }
    const cached = this.#cached(keyString);
    if (cached !== undefined) {
      // Joined now (a caller without a signal pins the load at once), handed over with the batch.
      const shared = this.#shared?.get(cached);
      const answer = shared !== undefined ? shared.join(signal) : signal === undefined ? cached : raceAbort(cached, signal, ignore);
      if (answer !== cached) answer.catch(ignore); // reported through the promise this caller gets
      return this.#afterPendingBatch(answer);
    }
    return this.#miss(key, keyString, signal);
  }

  /**
   * load() for resolvers that may return a value: the value itself when this request already
   * has it or the store holds it fresh in process (the memory store, a tiered store's L1), so
   * graphql-js completes the field without a promise; otherwise load()'s promise. Counted as
   * load() is, and the same answer within the request. (Unlike load(), a hit does not wait for
   * the pending batch: that is the point of read.)
   */
  read(key: K): V | Promise<V> {
    const keyString = this.#loader._keyString(key, this);
    const memo = this.#memo;
    if (memo === null) return this.load(key);
    const cached = this.#cached(keyString);
    if (cached !== undefined) {
      const outcome = outcomeOf(cached);
      return outcome === PENDING_OR_UNKNOWN || outcome instanceof Rejection ? cached : (outcome as V);
    }
    const storeKey = this.#loader._storeKey(key, keyString, this);
    const entry = this.#loader._peek(storeKey, key, this);
    if (entry !== undefined) {
      memo.set(keyString, fulfilled(entry as Entry<V>));
      return entry.value as V;
    }
    return this.#miss(key, keyString, undefined);
  }

  /** As DataLoader's: values and Errors in order, never rejects for a key; a non-array throws a TypeError. */
  loadMany(keys: ArrayLike<K>, options?: LoadOptions): Promise<(V | Error)[]> {
    return loadEach(this.name, keys, (key) => this.load(key, options));
  }

  /** Request-local: keeps an existing entry, as DataLoader's prime. An Error primes a rejection. */
  prime(key: K, value: V | Error): this {
    const memo = this.#memo;
    if (memo === null) return this;
    const keyString = this.#loader._keyString(key, this);
    if (this.#cached(keyString) === undefined) memo.set(keyString, primed(value));
    return this;
  }

  /** Request-local: forgets the memo for `key` (use loader.clear to invalidate the shared cache). */
  clear(key: K): this {
    this.#memo?.delete(this.#loader._keyString(key, this));
    return this;
  }

  clearAll(): this {
    this.#memo?.clear();
    return this;
  }

  /**
   * The memo's promise for `key`, unless it failed in a way DataLoader forgets (a whole-batch
   * failure, an abandoned load): that one is dropped here, when next looked at, rather than by a
   * handler per load, and the caller loads again.
   */
  #cached(keyString: string): Promise<V> | undefined {
    const memo = this.#memo;
    if (memo === null) return undefined;
    const cached = memo.get(keyString);
    if (cached === undefined) return undefined;
    const outcome = outcomeOf(cached);
    if (outcome instanceof Rejection && forgetUnlessKeyError(outcome.error)) {
      memo.delete(keyString);
      return undefined;
    }
    return cached;
  }

  #miss(key: K, keyString: string, signal: AbortSignal | undefined): Promise<V> {
    const loader = this.#loader;
    const storeKey = loader._storeKey(key, keyString, this);
    const memo = this.#memo;
    if (memo === null) {
      const alone = loader._loadAlone(key, storeKey, signal, this);
      this.#noteLoad(alone);
      return alone.then(passThrough);
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (signal === undefined) {
      // The registry's promise is shared by every caller of the key (and recorded, so the memo can
      // read its outcome); this caller gets its own, as from DataLoader: unhandled if nobody handles it.
      const promise = loader._load(key, storeKey, undefined, this);
      memo.set(keyString, promise);
      this.#noteLoad(promise);
      return promise.then(passThrough);
    }
    const shared = new Shared<V>((s) => loader._load(key, storeKey, s, this));
    memo.set(keyString, shared.promise);
    (this.#shared ??= new WeakMap()).set(shared.promise, shared);
    this.#noteLoad(shared.promise);
    shared.promise.catch((error: unknown) => {
      if ((shared.abandoned || forgetUnlessKeyError(error)) && memo.get(keyString) === shared.promise) memo.delete(keyString);
    });
    return shared.join(signal);
  }

  #loadsOfThisTick(): Promise<unknown>[] {
    const now = currentTick();
    if (this.#tick !== now) {
      this.#tick = now;
      this.#loads = undefined;
      this.#hits = undefined;
    }
    return (this.#loads ??= []);
  }

  #noteLoad(load: Promise<unknown>): void {
    this.#loadsOfThisTick().push(load);
  }

  /** A memo hit's answer, handed over with this tick's batch (see PendingHits). */
  #afterPendingBatch<V>(answer: Promise<V>): Promise<V> {
    const loads = this.#loadsOfThisTick();
    let hits = this.#hits;
    if (hits === undefined || hits.released) hits = this.#hits = new PendingHits(this.#loader.batchSchedule, loads);
    return hits.wait(answer);
  }

}

/** What a scoped loader's prime() holds: a settled promise, recorded (an Error primes a rejection nobody is told of). */
function primed<V>(value: V | Error): Promise<V> {
  if (!(value instanceof Error)) return fulfilled<V>({ value, freshUntil: Infinity, staleUntil: Infinity });
  const promise = rejected<V>(value);
  promise.catch(ignore);
  return promise;
}

export class RequestScope implements Sink {
  readonly #registry: Registry;
  // Made on first use: a request that never touches one of them pays nothing for it.
  #loaders: Map<Loader<unknown, unknown>, ScopedLoader<unknown, unknown>> | undefined;
  // The first loader's view is held in fields: most requests of a stampede use one loader.
  #firstLoader: Loader<unknown, unknown> | undefined;
  #firstScoped: ScopedLoader<unknown, unknown> | undefined;
  #computed: Map<string, Held<unknown>> | undefined;
  #stats: CounterSet | undefined;

  /** @internal use cache.request() */
  constructor(registry: Registry) {
    this.#registry = registry;
  }

  /**
   * The request's view of a registry loader: without options, the scope's one view, created on
   * first use; with DataLoader's memo options (`cache`, `cacheMap`), a new view of its own, as
   * each `new DataLoader(...)` is a new instance.
   */
  loader<K, V>(loader: Loader<K, V>, options?: ScopedLoaderOptions<V>): ScopedLoader<K, V> {
    if (options !== undefined) return new ScopedLoader(loader, this, options);
    const key = loader as Loader<unknown, unknown>;
    if (this.#firstLoader === key) return this.#firstScoped as ScopedLoader<K, V>;
    if (this.#firstLoader === undefined) {
      this.#firstLoader = key;
      return (this.#firstScoped = new ScopedLoader(key, this)) as ScopedLoader<K, V>;
    }
    const loaders = (this.#loaders ??= new Map());
    let scoped = loaders.get(key);
    if (scoped === undefined) {
      scoped = new ScopedLoader(key, this);
      loaders.set(key, scoped);
    }
    return scoped as ScopedLoader<K, V>;
  }

  load<K, V>(loader: Loader<K, V>, key: K, options?: LoadOptions): Promise<V> {
    return this.loader(loader).load(key, options);
  }

  /** getOrCompute, memoized for this request and attributed to its stats. Failures are not memoized. */
  getOrCompute<V>(key: string, fill: Fill<V>, options?: GetOrComputeOptions): Promise<V> {
    try {
      checkSignal(options);
    } catch (error) {
      return Promise.reject(error);
    }
    const computed = (this.#computed ??= new Map()) as Map<string, Held<V>>;
    return memoized(computed, key, options?.signal, (signal) => this.#registry._getOrCompute<V>(key, fill, options && { ...options, signal }, this), forgetAlways);
  }

  /**
   * @internal The @cached directive's hit path: this request's earlier answer for `key`, or the
   * value of a fresh entry held in process; NOTHING otherwise (the directive then makes its fill
   * and calls _compute). Nothing is allocated for a field until it must be.
   */
  _read(computation: Computation, key: string): unknown {
    const computed = this.#computed;
    if (computed !== undefined) {
      const answer = held(computed, key, undefined, forgetAlways, true);
      if (answer !== NOTHING) return answer;
    }
    const entry = this.#registry._peek(computation.source, key, NO_ARG, computation.policy, this);
    if (entry === undefined) return NOTHING;
    (this.#computed ??= new Map()).set(key, entry);
    return entry.value;
  }

  /** @internal The directive's miss: getOrCompute with its computation resolved at build time. */
  _compute<V>(computation: Computation, key: string, fill: Fill<V>): Promise<V> {
    const computed = (this.#computed ??= new Map()) as Map<string, Held<V>>;
    return memoized(computed, key, undefined, () => this.#registry._load<V>(computation.source, key, fill, computation.policy, undefined, this), forgetAlways);
  }

  /** What this request's loads did: hits, misses, coalesced, fills… per source. */
  stats(): MetricsSnapshot {
    return (this.#stats ??= new CounterSet()).snapshot();
  }

  /** @internal Sink */
  count(source: string, counter: CounterName, n: number): void {
    (this.#stats ??= new CounterSet()).count(source, counter, n);
  }
}

/** What RequestScope._read returns when it has no answer without a load. */
export { NOTHING as NO_ANSWER };

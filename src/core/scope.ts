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
import type { Cache } from './cache';
import { type Loader, batchFailures, loadEach } from './loader';
import { checkSignal } from './options';
import { CounterSet, type CounterName, type Sink } from './metrics';
import type { Fill, GetOrComputeOptions, LoadOptions, MetricsSnapshot } from './types';

/**
 * One memoized load of a request, shared by every caller of that key in the request. Each caller
 * may leave with its own signal without disturbing the others; the registry is told to stop
 * waiting only when every caller that came with a signal has left and none came without one.
 */
class Shared<V> {
  readonly promise: Promise<V>;
  readonly #controller: AbortController | undefined;
  /** A caller without a signal wants the value to the end. */
  #pinned: boolean;
  /** Callers with a signal still waiting. */
  #waiting = 0;

  constructor(start: (signal: AbortSignal | undefined) => Promise<V>, firstSignal: AbortSignal | undefined) {
    this.#pinned = firstSignal === undefined;
    this.#controller = firstSignal === undefined ? undefined : new AbortController();
    this.promise = start(this.#controller?.signal);
  }

  static settled<V>(value: V | Error): Shared<V> {
    return new Shared(() => {
      const promise = value instanceof Error ? Promise.reject(value) : Promise.resolve(value);
      promise.catch(() => {});
      return promise;
    }, undefined);
  }

  /** Every caller with a signal left before the value came: the registry load was abandoned. */
  get abandoned(): boolean {
    return this.#controller?.signal.aborted === true;
  }

  join(signal: AbortSignal | undefined): Promise<V> {
    if (signal === undefined) {
      this.#pinned = true;
      return this.promise; // the same promise for every such caller, as DataLoader
    }
    if (signal.aborted) return Promise.reject(signal.reason);
    this.#waiting++;
    return new Promise<V>((resolve, reject) => {
      const onAbort = () => {
        if (--this.#waiting === 0 && !this.#pinned) this.#controller?.abort(signal.reason);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.promise.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }
}

/** Memoizes `start` under `key`; forgets it when `forget(error)` says so or its callers all left. */
function memoized<V>(memo: Map<string, Shared<V>>, key: string, signal: AbortSignal | undefined, start: (signal: AbortSignal | undefined) => Promise<V>, forget: (error: unknown) => boolean): Promise<V> {
  let shared = memo.get(key);
  if (shared === undefined) {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const created = new Shared(start, signal);
    shared = created;
    memo.set(key, created);
    created.promise.catch((error: unknown) => {
      if ((created.abandoned || forget(error)) && memo.get(key) === created) memo.delete(key);
    });
  }
  return shared.join(signal);
}

/** Per-key Errors returned by a batch stay memoized (DataLoader); anything else is forgotten. */
function forgetUnlessKeyError(error: unknown): boolean {
  return !(error instanceof Error) || batchFailures.has(error);
}

const forgetAlways = () => true;

export class ScopedLoader<K, V> {
  readonly #loader: Loader<K, V>;
  readonly #scope: RequestScope;
  readonly #memo = new Map<string, Shared<V>>();

  /** @internal use scope.loader(loader) */
  constructor(loader: Loader<K, V>, scope: RequestScope) {
    this.#loader = loader;
    this.#scope = scope;
  }

  get name(): string {
    return this.#loader.name;
  }

  load(key: K, options?: LoadOptions): Promise<V> {
    let storeKey: string;
    try {
      storeKey = this.#loader.storeKey(key);
      checkSignal(options);
    } catch (error) {
      return Promise.reject(error);
    }
    return memoized(this.#memo, storeKey, options?.signal, (signal) => this.#loader._load(key, signal, this.#scope), forgetUnlessKeyError);
  }

  loadMany(keys: readonly K[], options?: LoadOptions): Promise<(V | Error)[]> {
    return loadEach(keys, (key) => this.load(key, options));
  }

  /** Request-local: keeps an existing entry, as DataLoader's prime. An Error primes a rejection. */
  prime(key: K, value: V | Error): this {
    const storeKey = this.#loader.storeKey(key);
    if (!this.#memo.has(storeKey)) this.#memo.set(storeKey, Shared.settled(value));
    return this;
  }

  /** Request-local: forgets the memo for `key` (use loader.clear to invalidate the shared cache). */
  clear(key: K): this {
    this.#memo.delete(this.#loader.storeKey(key));
    return this;
  }

  clearAll(): this {
    this.#memo.clear();
    return this;
  }
}

export class RequestScope implements Sink {
  readonly #cache: Cache;
  // Made on first use: a request that never touches one of them pays nothing for it.
  #loaders: Map<Loader<unknown, unknown>, ScopedLoader<unknown, unknown>> | undefined;
  #computed: Map<string, Shared<unknown>> | undefined;
  #stats: CounterSet | undefined;

  /** @internal use cache.request() */
  constructor(cache: Cache) {
    this.#cache = cache;
  }

  /** The request's view of a registry loader, created on first use. */
  loader<K, V>(loader: Loader<K, V>): ScopedLoader<K, V> {
    const loaders = (this.#loaders ??= new Map());
    let scoped = loaders.get(loader as Loader<unknown, unknown>);
    if (scoped === undefined) {
      scoped = new ScopedLoader(loader as Loader<unknown, unknown>, this);
      loaders.set(loader as Loader<unknown, unknown>, scoped);
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
    const computed = (this.#computed ??= new Map()) as Map<string, Shared<V>>;
    return memoized(computed, key, options?.signal, (signal) => this.#cache._getOrCompute<V>(key, fill, options && { ...options, signal }, this), forgetAlways);
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

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
import { type Loader, batchFailures } from './loader';
import { CounterSet, type CounterName, type Sink } from './metrics';
import type { Fill, GetOrComputeOptions, LoadOptions, MetricsSnapshot } from './types';

export class ScopedLoader<K, V> {
  readonly #loader: Loader<K, V>;
  readonly #scope: RequestScope;
  readonly #memo = new Map<string, Promise<V>>();

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
    } catch (error) {
      return Promise.reject(error);
    }
    const memo = this.#memo;
    let promise = memo.get(storeKey);
    if (promise === undefined) {
      promise = this.#loader._load(key, options?.signal, this.#scope);
      memo.set(storeKey, promise);
      promise.catch((error: unknown) => {
        // Per-key Errors from the batch stay memoized (DataLoader); anything else is forgotten.
        if (typeof error !== 'object' || error === null || batchFailures.has(error) || !(error instanceof Error) || options?.signal?.aborted) {
          if (memo.get(storeKey) === promise) memo.delete(storeKey);
        }
      });
    }
    return promise;
  }

  loadMany(keys: readonly K[], options?: LoadOptions): Promise<(V | Error)[]> {
    return Promise.all(keys.map((key) => this.load(key, options).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))))));
  }

  /** Request-local: keeps an existing entry, as DataLoader's prime. An Error primes a rejection. */
  prime(key: K, value: V | Error): this {
    const storeKey = this.#loader.storeKey(key);
    if (!this.#memo.has(storeKey)) {
      const promise = value instanceof Error ? Promise.reject(value) : Promise.resolve(value);
      promise.catch(() => {});
      this.#memo.set(storeKey, promise);
    }
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
  #computed: Map<string, Promise<unknown>> | undefined;
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
    const computed = (this.#computed ??= new Map());
    let promise = computed.get(key) as Promise<V> | undefined;
    if (promise === undefined) {
      const created = this.#cache._getOrCompute<V>(key, fill, options, this);
      promise = created;
      computed.set(key, created);
      created.catch(() => {
        if (computed.get(key) === created) computed.delete(key);
      });
    }
    return promise;
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

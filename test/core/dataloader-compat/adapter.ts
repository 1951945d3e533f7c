/**
 * One small adapter over the two implementations the compatibility suite runs against: the real
 * `dataloader` package, and herdcache's scoped loader. It changes only how a loader is made,
 * which is what the README promises a DataLoader user has to change:
 *
 *   new DataLoader(batch, options)            per request
 *   cache.request().loader(shared, memoOpts)  per request, with `shared = cache.loader({ name,
 *                                             batch, key, maxBatchSize, batchScheduleFn })` made once
 *
 * DataLoader's option names map onto herdcache's one to one (`cacheKeyFn` → `key`, `batch: false`
 * → `maxBatchSize: 1`, since herdcache's `batch` is the batch function); nothing else is adapted.
 */
import DataLoader from 'dataloader';
import { createCache, type CacheMapLike } from '../../../src/core';

export interface DataLoaderOptions<K, V> {
  batch?: boolean;
  maxBatchSize?: number;
  batchScheduleFn?: (callback: () => void) => void;
  cache?: boolean;
  cacheKeyFn?: (key: K) => string;
  cacheMap?: CacheMapLike<string, Promise<V>> | null;
  name?: string;
}

/** What a DataLoader user calls. */
export interface LoaderUnderTest<K, V> {
  load(key: K): Promise<V>;
  loadMany(keys: ArrayLike<K>): Promise<(V | Error)[]>;
  prime(key: K, value: V | Error): this;
  clear(key: K): this;
  clearAll(): this;
  readonly name: string | null;
}

export type BatchLoadFn<K, V> = (
  this: unknown,
  keys: readonly K[],
) => PromiseLike<ReadonlyArray<V | Error>> | ReadonlyArray<V | Error>;

export interface Implementation {
  readonly name: 'dataloader' | 'herdcache';
  /**
   * Returns a maker of per-request loaders over one batch function: each call is one more
   * request's loader (DataLoader: a new instance; herdcache: a new request scope's view).
   */
  perRequest<K, V>(batch: BatchLoadFn<K, V>, options?: DataLoaderOptions<K, V>): () => LoaderUnderTest<K, V>;
}

export const dataloader: Implementation = {
  name: 'dataloader',
  perRequest<K, V>(batch: BatchLoadFn<K, V>, options?: DataLoaderOptions<K, V>) {
    return () =>
      new DataLoader<K, V, string>(
        batch as DataLoader.BatchLoadFn<K, V>,
        options as DataLoader.Options<K, V, string>,
      ) as unknown as LoaderUnderTest<K, V>;
  },
};

let loaders = 0;

export const herdcache: Implementation = {
  name: 'herdcache',
  perRequest<K, V>(batch: BatchLoadFn<K, V>, options: DataLoaderOptions<K, V> = {}) {
    const { batch: batching, maxBatchSize, batchScheduleFn, cache: memo, cacheKeyFn, cacheMap, name } = options;
    const cache = createCache();
    const shared = cache.loader<K, V>({
      name: name ?? `loader${++loaders}`,
      batch: batch as never,
      ...(cacheKeyFn === undefined ? {} : { key: cacheKeyFn }),
      ...(batching === false ? { maxBatchSize: 1 } : maxBatchSize === undefined ? {} : { maxBatchSize }),
      ...(batchScheduleFn === undefined ? {} : { batchScheduleFn }),
    });
    const memoOptions =
      memo === undefined && cacheMap === undefined
        ? undefined
        : { ...(memo === undefined ? {} : { cache: memo }), ...(cacheMap === undefined ? {} : { cacheMap }) };
    return () => cache.request().loader(shared, memoOptions) as unknown as LoaderUnderTest<K, V>;
  },
};

export const implementations = [dataloader, herdcache];

/**
 * herdcache: stampede-proof caching for GraphQL backends. This entry is the core: the registry,
 * loaders, request scopes and the in-process memory store. It names no peer dependency, so a
 * strict TypeScript project compiles against it with none installed. Integrations live in their
 * own entries: herdcache/redis, herdcache/graphql, herdcache/apollo, herdcache/prometheus.
 */
export { Cache, createCache } from './cache';
export { Loader } from './loader';
export { RequestScope, ScopedLoader, type CacheMapLike, type ScopedLoaderOptions } from './scope';
export type { BatchScheduleFn } from './tick';
export {
  HerdcacheBatchError,
  HerdcacheError,
  HerdcacheKeyError,
  StorePartialError,
  type HerdcacheErrorCode,
} from './errors';
export { manualClock, systemClock, type Clock, type Entry, type ManualClock } from './freshness';
export { jitteredTtl } from './options';
export { MAX_PENDING_INVALIDATIONS } from './invalidation';
export { OUTAGE_HOLD_MS, OUTAGE_MAX_ENTRIES } from './outage';
export {
  MemoryStore,
  memoryStore,
  MEMORY_STORE_DEFAULT_MAX,
  MEMORY_STORE_DEFAULT_MAX_SIZE,
  MEMORY_STORE_MAX_ENTRIES,
  type MemoryStoreOptions,
} from './memory';
export type { FillLock, LockAttempt, Store, StoreReporter, StoreWrite } from './store';
export type {
  BatchContext,
  BatchFn,
  CacheHooks,
  CacheOptions,
  Counters,
  Fill,
  FillContext,
  FillInfo,
  FreshnessOptions,
  GetOrComputeOptions,
  LoadOptions,
  LoaderOptions,
  LockOptions,
  MetricsSnapshot,
} from './types';

/**
 * herdcache: stampede-proof caching for GraphQL backends.
 * Public exports only; see README.md for the guide.
 */
export { Cache, createCache } from './cache';
export { Loader } from './loader';
export { RequestScope, ScopedLoader } from './scope';
export { HerdcacheError, type HerdcacheErrorCode } from './errors';
export { jitteredTtl, manualClock, systemClock, type Clock, type Entry, type ManualClock } from './freshness';
export { MemoryStore, memoryStore, MEMORY_STORE_DEFAULT_MAX, type MemoryStoreOptions } from './stores/memory';
export { redisStore, type RedisStore, type RedisStoreOptions } from './stores/redis';
export { jsonCodec, JSON_FORMAT_VERSION, type Codec } from './stores/codec';
export { tieredStore, TIERED_DEFAULT_L1_TTL, type TieredStore, type TieredStoreOptions, type TieredStats } from './stores/tiered';
export type { BreakerOptions, BreakerState } from './stores/breaker';
export type { FillLock, LockAttempt, Store, StoreReporter, StoreWrite } from './stores/store';
export type {
  BatchContext,
  BatchFn,
  CacheHooks,
  CacheOptions,
  Counters,
  Fill,
  FillContext,
  FreshnessOptions,
  GetOrComputeOptions,
  LoadOptions,
  LoaderOptions,
  LockOptions,
  MetricsSnapshot,
} from './types';
export {
  cachedDirectiveTypeDefs,
  cachedDirectiveTransformer,
  cachedFieldKey,
  canonicalArgs,
  DEFAULT_KEY_PREFIX,
  herdcacheContext,
  requestScope,
  cacheReport,
  type BypassReason,
  type CacheReport,
  type CacheReportCounters,
  type CacheScope,
  type CachedDirectiveOptions,
  type CachedFieldKeyOptions,
  type HerdcacheContext,
  type HerdcacheContextOptions,
  type OperationCache,
  type ScopedLoaders,
} from './graphql';
export { herdcachePlugin, type HerdcachePluginOptions } from './apollo/plugin';
export {
  prometheusMetrics,
  HerdcacheMetrics,
  COUNTER_METRICS,
  FILL_DURATION_METRIC,
  DEFAULT_MAX_OPERATION_LABELS,
  type PrometheusMetricsOptions,
} from './prometheus';

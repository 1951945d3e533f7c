/**
 * herdcache/redis: the Redis store (ioredis, standalone or Cluster) with its distributed fill lock,
 * and the tiered store (in-process L1 over Redis L2, kept coherent over pub/sub).
 */
export { redisStore, type RedisStore, type RedisStoreOptions, type RedisWaitStats } from './redis-store';
export { jsonCodec, JSON_FORMAT_VERSION, type Codec } from './codec';
export {
  tieredStore,
  TIERED_DEFAULT_L1_TTL,
  TIERED_DEFAULT_MAX_MESSAGE_BYTES,
  type TieredStore,
  type TieredStoreOptions,
  type TieredStats,
} from './tiered';
export type { BreakerOptions, BreakerState } from './breaker';
export type { NodeHealth } from './guard';

/**
 * Replicas of a tiered cache in one process: each has its own L2 connection, its own subscriber
 * connection, its own L1 and its own registry. Two of them behave as two processes would, minus
 * the process boundary (the multi-process file has that).
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../../src/core/cache';
import type { Clock } from '../../../src/core/freshness';
import { memoryStore } from '../../../src/core/memory';
import { redisStore, type RedisStore, type RedisStoreOptions } from '../../../src/redis/redis-store';
import { tieredStore, type TieredStore, type TieredStoreOptions } from '../../../src/redis/tiered';
import type { CacheOptions } from '../../../src/core/types';
import { connect, eventually } from '../helpers';

export interface Replica {
  readonly client: Redis;
  readonly subscriber: Redis;
  readonly l2: RedisStore;
  readonly store: TieredStore;
  readonly cache: Cache;
  close(): Promise<void>;
}

export interface ReplicaOptions {
  prefix: string;
  url?: string;
  l1Ttl?: number;
  clock?: Clock;
  redis?: Partial<RedisStoreOptions>;
  tiered?: Partial<TieredStoreOptions>;
  cache?: CacheOptions;
  /** Wraps the L2 store handed to the tiered store (to slow it down, make it fail). */
  wrapL2?: (l2: RedisStore) => RedisStore;
  connectionName?: string;
}

export async function replica(options: ReplicaOptions): Promise<Replica> {
  const client = await connect(options.url);
  const subscriber = await connect(
    options.url,
    options.connectionName === undefined ? {} : { connectionName: options.connectionName },
  );
  const l2 = redisStore({ client, prefix: options.prefix, ...options.redis });
  const store = tieredStore({
    l2: options.wrapL2 ? options.wrapL2(l2) : l2,
    subscriber,
    l1: memoryStore({ max: 1000 }),
    l1Ttl: options.l1Ttl ?? 5000,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...options.tiered,
  });
  const cache = createCache({
    ttl: Infinity,
    store,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...options.cache,
  });
  if (!(await eventually(() => store.subscribed, 3000, 5))) throw new Error('the tiered store did not subscribe');
  return {
    client,
    subscriber,
    l2,
    store,
    cache,
    async close() {
      await cache.close();
      // A second disconnect() of an ended ioredis client keeps the process alive for seconds.
      if (client.status !== 'end') client.disconnect();
      if (subscriber.status !== 'end') subscriber.disconnect();
    },
  };
}

/** An L2 whose calls can be held at a gate (to put a change in the middle of them) or made to fail. */
export function controllableL2(l2: RedisStore) {
  const control = {
    /** When set, getMany and tagVersions answer only after this resolves (their command is already sent). */
    hold: undefined as Promise<void> | undefined,
    failPublish: false,
  };
  const held = async <T>(pending: Promise<T>): Promise<T> => {
    const hold = control.hold; // the gate in place when the call was made
    const value = await pending;
    if (hold !== undefined) await hold;
    return value;
  };
  const wrapped = delegatingL2(l2, {
    getMany: (keys) => held(l2.getMany(keys)),
    tagVersions: (tags) => held(l2.tagVersions(tags)),
    tagVersionsSince: (tags, since) => held(l2.tagVersionsSince(tags, since)),
    publish: (channel, message) =>
      control.failPublish ? Promise.reject(new Error('publish refused by the test')) : l2.publish(channel, message),
  });
  return { wrapped, control };
}

/**
 * `l2` with some of its methods replaced (a fault, a gate). Delegation, not a prototype: the
 * store's methods use private fields of the real instance.
 */
export function delegatingL2(l2: RedisStore, overrides: Partial<RedisStore>): RedisStore {
  const wrapped: RedisStore = {
    name: l2.name,
    lock: l2.lock,
    prefix: l2.prefix,
    client: l2.client,
    get breakerState() {
      return l2.breakerState;
    },
    get oversized() {
      return l2.oversized;
    },
    nodeHealth: () => l2.nodeHealth(),
    bind: (reporter) => l2.bind(reporter),
    getMany: (keys) => l2.getMany(keys),
    tagVersions: (tags) => l2.tagVersions(tags),
    tagVersionsSince: (tags, since) => l2.tagVersionsSince(tags, since),
    tagClock: () => l2.tagClock(),
    setMany: (writes) => l2.setMany(writes),
    delete: (keys, options) => l2.delete(keys, options),
    clear: () => l2.clear(),
    invalidateTags: (tags) => l2.invalidateTags(tags),
    publish: (channel, message) => l2.publish(channel, message),
    waitStats: () => l2.waitStats(),
    close: () => l2.close(),
  };
  return Object.assign(wrapped, overrides);
}

/**
 * The systems under test, built the way their users build them, behind one small shape:
 * `request()` gives a request's view (a fresh one for per-request systems, the shared one
 * otherwise), and `load(id)` reads through to the simulated database on a miss.
 */
import { createCache as createDedupe } from 'async-cache-dedupe';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisDriver } from 'bentocache/drivers/redis';
import DataLoader from 'dataloader';
import type Redis from 'ioredis';
import type { Cache, Store } from '../../src/core';
import { core } from './package';
import type { Item, SlowDb } from './db';
import type { SystemId } from './report';

export type Load = (id: string) => Promise<Item>;

export interface Contender {
  readonly system: SystemId;
  /** How it was configured, for the notes. */
  readonly label: string;
  request(): Load;
  /** herdcache only: its own counters, for cross-checks. */
  readonly cache?: Cache;
  close(): Promise<void>;
}

export interface Freshness {
  /** Fresh for this long. Whole seconds (async-cache-dedupe counts in seconds). Default 1 hour. */
  readonly ttlMs?: number;
  /** Stale-while-revalidate grace after the ttl, whole seconds. Default none. */
  readonly swrMs?: number;
}

export interface Shared {
  /** A connected client; the contender never quits it. */
  readonly client: Redis;
  /** Keys live under this prefix, so runs and systems never see each other's entries. */
  readonly prefix: string;
}

const HOUR = 3_600_000;

function duration(ms: number): string {
  return ms >= HOUR && ms % HOUR === 0
    ? `${ms / HOUR} h`
    : ms >= 1000 && ms % 1000 === 0
      ? `${ms / 1000} s`
      : `${ms} ms`;
}

const nothing = async () => {};

function seconds(ms: number, option: string): number {
  if (ms % 1000 !== 0) throw new Error(`${option} must be whole seconds for async-cache-dedupe, got ${ms} ms`);
  return ms / 1000;
}

export function noCache(db: SlowDb): Contender {
  const load: Load = (id) => db.get(id);
  return { system: 'noCache', label: 'the database on every load', request: () => load, close: nothing };
}

export function dataloaderPerRequest(db: SlowDb): Contender {
  return {
    system: 'dataloaderPerRequest',
    label: 'new DataLoader(batch) per request',
    request: () => {
      const loader = new DataLoader<string, Item>((ids) => db.getMany(ids));
      return (id) => loader.load(id);
    },
    close: nothing,
  };
}

/** One DataLoader for the whole process. It has no TTL: `clearEveryMs` emulates one with clearAll(). */
export function dataloaderShared(db: SlowDb, clearEveryMs?: number): Contender {
  const loader = new DataLoader<string, Item>((ids) => db.getMany(ids));
  const load: Load = (id) => loader.load(id);
  const timer = clearEveryMs === undefined ? undefined : setInterval(() => loader.clearAll(), clearEveryMs);
  return {
    system: 'dataloaderShared',
    label:
      clearEveryMs === undefined
        ? 'one DataLoader per process'
        : `one DataLoader per process, clearAll() every ${clearEveryMs} ms (its only expiry)`,
    request: () => load,
    close: async () => clearInterval(timer),
  };
}

export function asyncCacheDedupe(db: SlowDb, freshness: Freshness = {}, redis?: Shared): Contender {
  const ttl = seconds(freshness.ttlMs ?? HOUR, 'ttl');
  const stale = freshness.swrMs === undefined ? undefined : seconds(freshness.swrMs, 'swr');
  const storage =
    redis === undefined
      ? { type: 'memory' as const, options: { size: 10_000 } }
      : { type: 'redis' as const, options: { client: redis.client } };
  const cache = createDedupe({ ttl, stale, storage }).define(
    'item',
    { serialize: (id: string) => (redis === undefined ? id : `${redis.prefix}${id}`) },
    (id: string) => db.get(id),
  );
  const load: Load = (id) => cache.item(id);
  return {
    system: 'asyncCacheDedupe',
    label: `createCache({ ttl: ${ttl}${stale === undefined ? '' : `, stale: ${stale}`}, storage: ${storage.type} })`,
    request: () => load,
    close: nothing,
  };
}

export function bentocache(
  db: SlowDb,
  freshness: Freshness = {},
  layers: { l1: boolean; l2?: Shared } = { l1: true },
): Contender {
  const store = bentostore();
  if (layers.l1) store.useL1Layer(memoryDriver({ maxItems: 10_000 }));
  // Its own connection: disconnectAll() quits the client it was given.
  if (layers.l2 !== undefined)
    store.useL2Layer(redisDriver({ connection: layers.l2.client.duplicate(), prefix: layers.l2.prefix }));
  const ttl = freshness.ttlMs ?? HOUR;
  const grace = freshness.swrMs ?? false;
  const bento = new BentoCache({ default: 'bench', stores: { bench: store }, ttl, grace });
  const load: Load = (id) => bento.getOrSet({ key: id, factory: () => db.get(id) });
  const where = [layers.l1 ? 'memory L1' : '', layers.l2 ? 'Redis L2' : ''].filter(Boolean).join(' + ');
  return {
    system: 'bentocache',
    label: `getOrSet, ${where}, ttl ${duration(ttl)}${grace === false ? '' : `, grace ${duration(grace)} (soft timeout 0: stale served at once)`}`,
    request: () => load,
    close: () => bento.disconnectAll(),
  };
}

export interface HerdcacheOptions extends Freshness {
  readonly store?: Store;
  /** Default: a loader read through a request scope per request. */
  readonly api?: 'scopes' | 'getOrCompute';
  /** Probabilistic early refresh (XFetch), beta 1. */
  readonly earlyRefresh?: boolean;
}

export function herdcache(db: SlowDb, options: HerdcacheOptions = {}): Contender {
  const cache = core.createCache({
    store: options.store,
    ttl: options.ttlMs ?? HOUR,
    swr: options.swrMs,
    earlyRefresh: options.earlyRefresh,
  });
  if (options.api === 'getOrCompute') {
    const load: Load = (id) => cache.getOrCompute(id, () => db.get(id));
    return {
      system: 'herdcache',
      label: 'cache.getOrCompute(key, fill)',
      request: () => load,
      cache,
      close: () => cache.close(),
    };
  }
  const items = cache.loader({ name: 'item', batch: (ids: readonly string[]) => db.getMany(ids) });
  return {
    system: 'herdcache',
    label: 'cache.loader(...) read through cache.request() per request',
    request: () => {
      const scope = cache.request().loader(items);
      return (id) => scope.load(id);
    },
    cache,
    close: () => cache.close(),
  };
}

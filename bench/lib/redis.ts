/**
 * Redis for the rows that need it: REDIS_URL when it points at this machine, else a throwaway
 * redis-server from PATH on a free 127.0.0.1 port. And herdcache's Redis store (herdcache/redis).
 */
import Redis from 'ioredis';
import type { Store } from '../../src/core';
import { redis } from './package';
import { startRedisServer } from '../../test/setup/redis-server';

export interface RedisEnv {
  readonly url: string;
  /** Where it came from, for the report. */
  readonly origin: string;
  stop(): Promise<void>;
}

/** `subscriber`: a connection of its own that wakes fill-lock waiters (see redisStore). */
export type RedisStoreFactory = (options: { client: Redis; prefix: string; subscriber?: Redis }) => Store;

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** A Redis to use, or the reason there is none. */
export async function findRedis(): Promise<RedisEnv | string> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    let host: string;
    try {
      host = new URL(fromEnv).hostname;
    } catch {
      return `REDIS_URL is not a URL: ${fromEnv}`;
    }
    // The bench counts commands with INFO commandstats and floods keys: only a local server.
    if (!LOOPBACK.has(host)) return `REDIS_URL points at ${host}; the bench only targets 127.0.0.1`;
    const client = new Redis(fromEnv, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await client.connect();
      await client.ping();
    } catch (error) {
      return `REDIS_URL ${fromEnv} does not answer: ${(error as Error).message}`;
    } finally {
      client.disconnect();
    }
    return { url: fromEnv, origin: 'REDIS_URL', stop: async () => {} };
  }
  try {
    const server = await startRedisServer();
    return { url: server.url, origin: `throwaway redis-server on port ${server.port}`, stop: () => server.stop() };
  } catch (error) {
    return `no REDIS_URL and no redis-server on PATH (${(error as Error).message})`;
  }
}

export async function connect(url: string): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  return client;
}

/** herdcache's redisStore(), or why it cannot be used (kept as a seam: the rows skip, not crash). */
export function loadRedisStore(): RedisStoreFactory | string {
  return redis.redisStore as RedisStoreFactory;
}

/** Checks the store round-trips one entry against `url`: a broken work in progress is a skip, not a crash. */
export async function checkRedisStore(factory: RedisStoreFactory, url: string): Promise<string | undefined> {
  const client = await connect(url);
  try {
    const store = factory({ client, prefix: `bench:check:${process.pid}:` });
    const entry = { value: { ok: true }, freshUntil: Infinity, staleUntil: Infinity };
    await store.setMany([{ key: 'k', entry, ttl: 10_000 }]);
    const [read] = await store.getMany(['k']);
    await store.delete(['k']);
    if ((read?.value as { ok?: boolean } | undefined)?.ok !== true)
      return 'redisStore() did not read back what it wrote';
    return undefined;
  } catch (error) {
    return `redisStore() failed a round trip: ${(error as Error).message}`;
  } finally {
    client.disconnect();
  }
}

/** `INFO commandstats` as command → calls. */
export async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats');
  const calls = new Map<string, number>();
  for (const line of info.split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match) calls.set(match[1]!, Number(match[2]));
  }
  return calls;
}

/** Calls per command between two snapshots, without the INFO calls that took them. */
export function commandDelta(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [command, calls] of after) {
    if (command === 'info') continue;
    const d = calls - (before.get(command) ?? 0);
    if (d > 0) out.set(command, d);
  }
  return out;
}

/** Deletes every key matching `pattern` (SCAN, never KEYS). */
export async function deleteMatching(client: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await client.unlink(...keys);
  } while (cursor !== '0');
}

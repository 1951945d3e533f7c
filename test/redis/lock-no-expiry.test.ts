/**
 * A lock key without expiry is not a lock of ours (herdcache sets a PX on every lock it takes):
 * foreign, typed by hand, left by an old version, another type. The acquire script takes it over
 * at once, so no load waits on it (before: the first load of the key waited lockWaitTimeout).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix, sleep } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  client.disconnect();
});

describe('a lock key with no expiry', () => {
  it('is taken over by the first load: no wait, one fill, the lock ours until written', async () => {
    const prefix = randomPrefix('lock-no-expiry');
    const lockKey = `${prefix}{k}:lock`;
    await client.set(lockKey, 'left by an old version'); // no PX
    // A wait would show as lockContended (and, with this clock, never end: sleep never settles).
    const stuck = { now: () => Date.now(), sleep: () => new Promise<void>(() => {}) };
    const cache = createCache({
      store: redisStore({ client, prefix }),
      ttl: 60_000,
      lock: true,
      lockTtl: 300,
      clock: stuck,
      lockWaitTimeout: 60_000,
    });
    let fills = 0;
    expect(await cache.getOrCompute('k', () => `v${++fills}`)).toBe('v1');
    expect(cache.metrics().total).toMatchObject({ lockContended: 0, lockTimeouts: 0, lockAcquired: 1, fills: 1 });
    await sleep(20); // the fenced write leaves right after the answer
    expect(await client.exists(lockKey)).toBe(0); // released by the write: it was ours
    await cache.close();
  });

  it('whatever its type; a live lock (with its expiry) is left alone', async () => {
    const prefix = randomPrefix('lock-no-expiry-types');
    const store = redisStore({ client, prefix });
    await client.set(`${prefix}{a}:lock`, 'foreign');
    await client.rpush(`${prefix}{b}:lock`, 'x', 'y');
    await client.hset(`${prefix}{c}:lock`, 'f', 'v');
    await client.set(`${prefix}{d}:lock`, 'live', 'PX', 60_000);
    const attempts = await store.lock.acquire(['a', 'b', 'c', 'd'], 'mine', 5_000);
    expect(attempts.map((a) => a?.won)).toEqual([true, true, true, false]);
    for (const key of ['a', 'b', 'c']) {
      expect(await client.get(`${prefix}{${key}}:lock`)).toBe('mine');
      const pttl = await client.pttl(`${prefix}{${key}}:lock`);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(5_000);
    }
    expect(await client.get(`${prefix}{d}:lock`)).toBe('live');
    expect(await client.pttl(`${prefix}{d}:lock`)).toBeGreaterThan(5_000);
  });

  it('two replicas loading a key behind garbage at once: one fill', async () => {
    const prefix = randomPrefix('lock-no-expiry-fleet');
    await client.set(`${prefix}{k}:lock`, 'garbage');
    const caches = [0, 1].map(() =>
      createCache({ store: redisStore({ client, prefix }), ttl: 60_000, lock: true, lockPollInterval: 10 }),
    );
    let fills = 0;
    const fill = async () => {
      fills++;
      await sleep(30);
      return 'v';
    };
    const values = await Promise.all(
      caches.flatMap((cache) => [cache.getOrCompute('k', fill), cache.getOrCompute('k', fill)]),
    );
    expect(values).toEqual(['v', 'v', 'v', 'v']);
    expect(fills).toBe(1);
    expect(caches.reduce((n, cache) => n + cache.metrics().total.lockTimeouts, 0)).toBe(0);
    for (const cache of caches) await cache.close();
  });
});

/**
 * A lock key without expiry (foreign, or left by an old version) must not make every fill wait
 * lockWaitTimeout forever: the acquire script gives it the lock's ttl, so it clears by itself.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { connect, eventually, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  client.disconnect();
});

describe('a lock key with no expiry', () => {
  it('is given the lock ttl by the first acquire: one load waits, later misses do not', async () => {
    const prefix = randomPrefix('lock-no-expiry');
    const lockKey = `${prefix}{k}:lock`;
    await client.set(lockKey, 'left by an old version'); // no PX
    const lockTtl = 300;
    // lockWaitTimeout is long: the first load waits for the expiry the script gave the lock, not for the timeout.
    const cache = createCache({ store: redisStore({ client, prefix }), ttl: 60_000, lock: true, lockTtl, lockPollInterval: 20, lockWaitTimeout: 5_000 });
    let fills = 0;
    expect(await cache.getOrCompute('k', () => `v${++fills}`)).toBe('v1');
    expect(cache.metrics().total).toMatchObject({ lockContended: 1, lockTimeouts: 0, lockAcquired: 1, fills: 1 });
    // Later misses of the same key do not wait: the stale lock is gone.
    await cache.invalidate('k');
    expect(await cache.getOrCompute('k', () => `v${++fills}`)).toBe('v2');
    expect(cache.metrics().total).toMatchObject({ lockContended: 1, lockTimeouts: 0, lockAcquired: 2, fills: 2 });
    await cache.close();
  });

  it('the acquire that finds it sets its expiry to the lock ttl (a live lock keeps its own)', async () => {
    const prefix = randomPrefix('lock-no-expiry-pttl');
    const store = redisStore({ client, prefix });
    await client.set(`${prefix}{a}:lock`, 'foreign');
    await client.set(`${prefix}{b}:lock`, 'live', 'PX', 60_000);
    const attempts = await store.lock!.acquire(['a', 'b'], 'mine', 5_000);
    expect(attempts.map((a) => a?.won)).toEqual([false, false]);
    const pttlA = await client.pttl(`${prefix}{a}:lock`);
    expect(pttlA).toBeGreaterThan(0);
    expect(pttlA).toBeLessThanOrEqual(5_000);
    expect(await client.pttl(`${prefix}{b}:lock`)).toBeGreaterThan(5_000);
    expect(await eventually(async () => (await client.exists(`${prefix}{a}:lock`)) === 0, 10_000)).toBe(true);
  });
});

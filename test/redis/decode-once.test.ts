/** An undecodable entry in Redis is counted once per load in decodeErrors, however often the load re-reads it. */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  client.disconnect();
});

describe('decodeErrors on Redis', () => {
  it('one load of a garbage entry counts 1 (the read and the lock re-check see the same payload)', async () => {
    const prefix = randomPrefix('decode-once');
    const cache = createCache({ store: redisStore({ client, prefix }), ttl: 60_000 });
    await client.set(`${prefix}{bad}`, 'not json {');
    expect(await cache.getOrCompute('bad', () => 'fixed')).toBe('fixed');
    expect(cache.metrics().total).toMatchObject({ decodeErrors: 1, misses: 1, fills: 1 });
    expect(await cache.getOrCompute('bad', () => 'again')).toBe('fixed'); // overwritten by the fill
    expect(cache.metrics().total.decodeErrors).toBe(1);
    await cache.close();
  });

  it('a load polling a contended lock over a garbage entry still counts 1', async () => {
    const prefix = randomPrefix('decode-poll');
    const cache = createCache({
      store: redisStore({ client, prefix }),
      ttl: 60_000,
      lockPollInterval: 5,
      lockWaitTimeout: 200,
    });
    await client.set(`${prefix}{bad}`, 'not json {');
    await client.set(`${prefix}{bad}:lock`, 'someone else', 'PX', 60_000);
    expect(await cache.getOrCompute('bad', () => 'mine')).toBe('mine');
    const total = cache.metrics().total;
    expect(total.lockTimeouts).toBe(1); // it polled until lockWaitTimeout: several re-reads
    expect(total.decodeErrors).toBe(1);
    await cache.close();
  });
});

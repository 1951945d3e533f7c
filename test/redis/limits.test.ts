/**
 * The largest durations createCache accepts work on a real Redis (PX and the payload's times),
 * and a directive ttl beyond them is refused when the schema is built.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { MAX_DURATION } from '../../src/core/options';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { redisStore } from '../../src/redis/redis-store';
import { makeSchema } from '../graphql/fixtures';
import { connect, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

it('ttl, swr and lockTtl at MAX_DURATION (jitter 1: twice the ttl) are kept by Redis', async () => {
  const prefix = randomPrefix('limits');
  const errors: unknown[] = [];
  const cache = createCache({
    store: redisStore({ client, prefix }),
    ttl: MAX_DURATION,
    swr: MAX_DURATION,
    jitter: 1,
    lockTtl: MAX_DURATION,
    hooks: { onStoreError: (error) => void errors.push(error) },
  });
  expect(await cache.getOrCompute('k', () => 'v')).toBe('v');
  expect(errors).toEqual([]);
  expect(await client.pttl(`${prefix}{k}`)).toBeGreaterThan(MAX_DURATION);
  let fills = 0;
  const again = createCache({ store: redisStore({ client, prefix }), ttl: MAX_DURATION });
  expect(await again.getOrCompute('k', () => ++fills)).toBe('v');
  expect(fills).toBe(0);
});

it('@cached(ttl:) beyond MAX_DURATION is refused at schema build, naming the field', () => {
  const schema = makeSchema(`type Query { a: Int @cached(ttl: ${MAX_DURATION}) }`, { Query: { a: () => 1 } });
  expect(() => cachedDirectiveTransformer(schema, { cache: createCache() })).toThrow(
    /@cached\(ttl:\) on Query\.a must be at most 1000000000000 seconds, got 1000000000000000/,
  );
});

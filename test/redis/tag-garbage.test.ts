/**
 * Something foreign at a tag's version key (found by `npm run chaos`, "garbage at tag keys"): a
 * string that is not an integer, or a key of another type. invalidateTags must still invalidate:
 * before, INCR failed there and every invalidation of that tag was lost (a store error, counted),
 * so values the user had invalidated kept being served.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { tagVersionKey } from '../../src/redis/keys';
import { connect, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

const FOREIGN: readonly [string, (key: string) => Promise<unknown>][] = [
  ['a string that is not an integer', (key) => client.set(key, 'not a version')],
  ['a negative integer', (key) => client.set(key, '-3')],
  ['a number too large to be a version', (key) => client.set(key, '1e300')],
  ['infinity', (key) => client.set(key, 'inf')],
  ['a list', (key) => client.rpush(key, 'a')],
  ['a hash', (key) => client.hset(key, 'f', 'v')],
];

it.each(FOREIGN)(
  'a read (and invalidateTags) replaces %s at the version key with a version of ours',
  async (_, plant) => {
    const prefix = randomPrefix('tag-garbage');
    const store = redisStore({ client, prefix, commandTimeout: 10_000 });
    const errors: unknown[] = [];
    const cache = createCache({ ttl: 60_000, store, hooks: { onStoreError: (error) => errors.push(error) } });
    const versionKey = tagVersionKey(prefix, 'T', 256);
    await plant(versionKey);

    // The first read of the tag's version makes the key ours again (a version at the server's
    // time, as a bump would): the value is cached from there (it was never cached while the garbage
    // stayed: every load filled, silently).
    expect(await cache.getOrCompute('k', () => 'old', { tags: ['T'] })).toBe('old');
    const read = Number(await client.get(versionKey));
    expect(Number.isSafeInteger(read) && read > 1e15).toBe(true);
    expect(await cache.getOrCompute('k', () => 'refilled', { tags: ['T'] })).toBe('old');
    await cache.invalidateTags(['T']);
    expect(errors).toEqual([]);
    expect(await cache.getOrCompute('k', () => 'new', { tags: ['T'] })).toBe('new');
    // The version key is ours again: an integer from the server's clock (µs), with an expiry.
    const version = Number(await client.get(versionKey));
    expect(Number.isSafeInteger(version) && version > 1e15).toBe(true);
    expect(await client.pttl(versionKey)).toBeGreaterThan(0);
    // From there, tagging works as usual: cached, then invalidated by the next bump.
    expect(await cache.getOrCompute('k', () => 'newer', { tags: ['T'] })).toBe('new');
    await cache.invalidateTags(['T']);
    expect(Number(await client.get(versionKey))).toBeGreaterThan(version);
    expect(await cache.getOrCompute('k', () => 'newest', { tags: ['T'] })).toBe('newest');
    expect(errors).toEqual([]);
  },
);

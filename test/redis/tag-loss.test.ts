/**
 * A tag's version key lost while entries that recorded it live on (its Cluster master restarted
 * empty, a failover that lost the last writes, an eviction; a DEL here, which leaves Redis in the
 * same state): the entries are misses, never served as current again. Before, a missing key read
 * as version 0 and versions were counted from 0: every entry filled before the tag's first
 * invalidation, and every one that recorded a count the restarted counter came back to, was served
 * again after an invalidation had returned. Counted on fills, against a real Redis.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { tagVersionKey } from '../../src/redis/keys';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

function setup(label: string) {
  const prefix = randomPrefix(label);
  const cache = createCache({ ttl: 60_000, store: redisStore({ client, prefix }) });
  const db = { value: 'old', fills: 0 };
  const read = () =>
    cache.getOrCompute(
      'k',
      () => {
        db.fills++;
        return db.value;
      },
      { tags: ['T'] },
    );
  const lose = () => client.del(tagVersionKey(prefix, 'T', 256));
  return { cache, db, read, lose };
}

it('an invalidation that returned is not undone when the version key is lost', async () => {
  const { cache, db, read, lose } = setup('tag-loss-first');
  expect(await read()).toBe('old');
  expect(await read()).toBe('old'); // a hit: tagging costs no fill
  expect(db.fills).toBe(1);
  db.value = 'new';
  await cache.invalidateTags(['T']);
  await lose();
  for (let i = 0; i < 3; i++) expect(await read()).toBe('new');
  expect(db.fills).toBe(2);
  await cache.close();
});

it('a bump after the loss does not bring back an entry that recorded an earlier version', async () => {
  const { cache, db, read, lose } = setup('tag-loss-bump');
  await cache.invalidateTags(['T']);
  expect(await read()).toBe('old'); // recorded the version of that first bump
  await lose();
  db.value = 'new';
  await cache.invalidateTags(['T']); // on the lost key: a version no entry recorded
  for (let i = 0; i < 3; i++) expect(await read()).toBe('new');
  expect(db.fills).toBe(2);
  await cache.close();
});

it('a lost key with no invalidation costs one fill, never a wrong answer', async () => {
  const { cache, db, read, lose } = setup('tag-loss-quiet');
  expect(await read()).toBe('old');
  await lose();
  expect(await read()).toBe('old');
  expect(await read()).toBe('old');
  expect(db.fills).toBe(2);
  await cache.close();
});

it('a version key made by a read stays while it is read: past half its expiry, a read gives it again', async () => {
  const prefix = randomPrefix('tag-loss-kept');
  const store = redisStore({ client, prefix, tagTtl: 60_000 });
  const key = tagVersionKey(prefix, 'T', 256);
  const [made] = await store.tagVersions(['T']);
  expect(await client.pttl(key)).toBeGreaterThan(50_000);
  await client.pexpire(key, 40_000); // two thirds of it left: not given again
  expect(await store.tagVersions(['T'])).toEqual([made]);
  expect(await client.pttl(key)).toBeLessThanOrEqual(40_000);
  await client.pexpire(key, 20_000); // a third left: given again, the same version
  expect(await store.tagVersions(['T'])).toEqual([made]);
  expect(await client.pttl(key)).toBeGreaterThan(50_000);
  // A bump's longer expiry (2 × tagTtl) is never shortened by a read.
  await store.invalidateTags(['T']);
  await store.tagVersions(['T']);
  expect(await client.pttl(key)).toBeGreaterThan(100_000);
});

it('reads the versions of 160,000 tags in one call (the keys are passed as an array, not spread)', async () => {
  const store = redisStore({ client, prefix: randomPrefix('tag-loss-many'), commandTimeout: 20_000 });
  const tags = Array.from({ length: 160_000 }, (_, i) => `T${i}`);
  const versions = await store.tagVersions(tags);
  expect(versions).toHaveLength(tags.length);
  expect(versions.every((version) => Number.isSafeInteger(version) && version > 1e15)).toBe(true);
  await store.clear();
}, 30_000);

/**
 * A prime superseded by a later prime while it reads its tags' versions (a Redis round trip) writes
 * nothing and fences nothing: its fence (a delete) would remove the later prime's value. On the
 * test's real redis-server, the first versions read held back 50 ms.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

it('a prime superseded while it reads tag versions does not delete the later prime', async () => {
  const store = redisStore({ client, prefix: randomPrefix('prime') });
  const tagVersions = store.tagVersions.bind(store);
  let slowOnce = true;
  store.tagVersions = async (tags: readonly string[]) => {
    if (slowOnce) {
      slowOnce = false;
      await delay(50);
    }
    return tagVersions(tags);
  };
  const cache = createCache({ ttl: 60_000, store });
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => ids.map((id) => `loaded-${id}`),
    tags: (id) => [`User:${id}`],
  });
  const first = users.prime(1, 'older');
  await delay(10); // its tag versions read pending
  await users.prime(1, 'newer');
  await first;
  expect(await users.load(1)).toBe('newer');
  await cache.close();
});

/**
 * A prime superseded by a later prime while it reads its tags' versions (a Redis round trip) writes
 * nothing, and fences the key before the later prime writes (after it, the fence would delete the
 * later prime's value). A later prime whose value never comes (its promise rejects, resolves to
 * nothing, or is pending) supersedes it all the same: then the older value must still go. On the
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

async function setup() {
  const store = redisStore({ client, prefix: randomPrefix('prime-fence') });
  const tagVersions = store.tagVersions.bind(store);
  let slow = false;
  store.tagVersions = async (tags: readonly string[]) => {
    if (slow) {
      slow = false;
      await delay(50);
    }
    return tagVersions(tags);
  };
  const cache = createCache({ ttl: 60_000, store });
  let version = 'old';
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => ids.map((id) => `${version}-${id}`),
    tags: (id) => [`User:${id}`],
  });
  expect(await users.load(1)).toBe('old-1'); // stored
  version = 'new';
  slow = true;
  return { cache, users };
}

for (const [label, later] of [
  ['rejects', () => Promise.reject(new Error('source down'))],
  ['resolves to undefined', () => Promise.resolve(undefined)],
] as const) {
  it(`a tagged prime superseded by a later prime whose promise ${label}: the old value does not stay`, async () => {
    const { cache, users } = await setup();
    const first = users.prime(1, 'new-1'); // the data changed: 'old-1' must go
    await delay(10); // its tag versions read pending
    await users.prime(1, later() as unknown as string);
    await first;
    expect(await users.load(1)).not.toBe('old-1');
    await cache.close();
  });
}

it('a tagged prime superseded by a later prime still pending: the old value does not stay meanwhile', async () => {
  const { cache, users } = await setup();
  const first = users.prime(1, 'new-1');
  await delay(10);
  void users.prime(1, new Promise<string>(() => {}) as unknown as string); // e.g. a slow source
  await first;
  expect(await users.load(1)).not.toBe('old-1');
  await cache.close();
});

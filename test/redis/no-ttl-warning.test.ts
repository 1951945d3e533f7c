/**
 * A cache given a store that keeps values for other processes (Redis, tiered) and no ttl stores
 * nothing (coalesce-only is the default): its first load of each loader, label or getOrCompute says
 * so once through process.emitWarning (code HERDCACHE_NO_TTL), naming it and the fix. An explicit
 * `ttl: 0` (coalescing on purpose) and a ttl anywhere are silent.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

let client: Redis;
let warnings: { message: string; code: string | undefined }[];
let spy: jest.SpyInstance;

beforeAll(async () => {
  client = await connect();
});

afterAll(() => {
  client.disconnect();
});

beforeEach(() => {
  warnings = [];
  spy = jest.spyOn(process, 'emitWarning').mockImplementation(((
    warning: string | Error,
    options?: { code?: string },
  ) => {
    warnings.push({ message: String(warning), code: typeof options === 'object' ? options?.code : undefined });
  }) as typeof process.emitWarning);
});

afterEach(() => spy.mockRestore());

function noTtl() {
  return warnings.filter((warning) => warning.code === 'HERDCACHE_NO_TTL');
}

it('a Redis store and no ttl: the first getOrCompute warns once, naming the key and the fix; later loads of any key do not', async () => {
  const cache = createCache({ store: redisStore({ client, prefix: randomPrefix('no-ttl'), subscriber: false }) });
  let fills = 0;
  for (let i = 0; i < 3; i++) await cache.getOrCompute('user:1', async () => ++fills);
  await cache.getOrCompute('user:2', async () => ++fills);
  expect(fills).toBe(4); // nothing stored: every sequential load fills
  const [warning, ...more] = noTtl();
  expect(more).toEqual([]);
  expect(warning!.message).toContain('getOrCompute("user:1")');
  expect(warning!.message).toContain('redis store');
  expect(warning!.message).toMatch(/Give a ttl/);
  expect(warning!.message).toMatch(/ttl: 0/);
  await cache.close();
});

it('a long (client-derived) key is named by its head only', async () => {
  const cache = createCache({ store: redisStore({ client, prefix: randomPrefix('no-ttl'), subscriber: false }) });
  await cache.getOrCompute(`q:${'x'.repeat(100_000)}`, async () => 1);
  const [warning] = noTtl();
  expect(warning!.message).toContain(`getOrCompute("q:${'x'.repeat(78)}…")`);
  expect(warning!.message.length).toBeLessThan(1_000);
  await cache.close();
});

it('each loader and label warns once, by name', async () => {
  const cache = createCache({ store: redisStore({ client, prefix: randomPrefix('no-ttl'), subscriber: false }) });
  const users = cache.loader<string, string>({ name: 'users', batch: async (keys) => keys.map((key) => `u${key}`) });
  const posts = cache.loader<string, string>({ name: 'posts', batch: async (keys) => keys.map((key) => `p${key}`) });
  await Promise.all([users.load('1'), users.load('2'), posts.load('1')]);
  await users.load('3');
  await cache.getOrCompute('a', async () => 1, { label: 'feed' });
  await cache.getOrCompute('b', async () => 1, { label: 'feed' });
  const messages = noTtl().map((warning) => warning.message);
  expect(messages).toHaveLength(3);
  expect(messages.filter((message) => message.includes('loader "users"'))).toHaveLength(1);
  expect(messages.filter((message) => message.includes('loader "posts"'))).toHaveLength(1);
  expect(messages.filter((message) => message.includes('label: "feed"'))).toHaveLength(1);
  await cache.close();
});

it('an explicit ttl: 0 (cache, loader or call) or a ttl anywhere does not warn', async () => {
  const store = () => redisStore({ client, prefix: randomPrefix('no-ttl'), subscriber: false });
  const coalescing = createCache({ store: store(), ttl: 0 });
  await coalescing.getOrCompute('k', async () => 1);
  await coalescing.loader<string, string>({ name: 'l', batch: async (keys) => [...keys] }).load('x');
  const perLoader = createCache({ store: store() });
  await perLoader.loader<string, string>({ name: 'l', ttl: 0, batch: async (keys) => [...keys] }).load('x');
  await perLoader.loader<string, string>({ name: 'm', ttl: 60_000, batch: async (keys) => [...keys] }).load('x');
  await perLoader.getOrCompute('k', async () => 1, { ttl: 0 });
  await perLoader.getOrCompute('j', async () => 1, { ttl: 60_000 });
  const stored = createCache({ store: store(), ttl: 60_000 });
  await stored.getOrCompute('k', async () => 1);
  expect(noTtl()).toEqual([]);
  await Promise.all([coalescing.close(), perLoader.close(), stored.close()]);
});

it('a call that gives a ttl does not silence the cache-wide warning for the calls that do not', async () => {
  const cache = createCache({ store: redisStore({ client, prefix: randomPrefix('no-ttl'), subscriber: false }) });
  await cache.getOrCompute('k', async () => 1, { ttl: 60_000, swr: 0 });
  await cache.getOrCompute('k2', async () => 1, { swr: 0 });
  expect(noTtl()).toHaveLength(1);
  await cache.close();
});

it("the in-process memory store (default or given) does not warn: its values are this process's own", async () => {
  await createCache().getOrCompute('k', async () => 1);
  await createCache({ store: memoryStore() }).getOrCompute('k', async () => 1);
  expect(noTtl()).toEqual([]);
});

/**
 * A prime that has not written yet (it awaits its tag versions and its fence first) and an
 * invalidation issued after it: the invalidation wins. The prime does not write (the next load
 * fills), whatever the invalidation (a key, a tag, a clear) and on a store that does not fence the
 * write itself (the memory store; any store's clear). A later prime of the same key wins over an
 * earlier one; primes of other keys are not held back. On the memory store and a real Redis.
 */
import { createCache, type Cache } from '../../src/core/cache';
import { memoryAndRedis } from '../redis/helpers';

const stores = memoryAndRedis('prime-race', ['memory store', 'Redis']);

function loaderOn(cache: Cache) {
  const calls: string[][] = [];
  const users = cache.loader<string, string>({
    name: 'user',
    ttl: 60_000,
    tags: (id) => [`User:${id}`],
    batch: async (ids) => {
      calls.push([...ids]);
      return ids.map((id) => `fresh ${id}`);
    },
  });
  return { users, calls };
}

describe.each(stores)('%s', (_name, makeStore) => {
  let cache: Cache;
  beforeEach(() => {
    cache = createCache({ store: makeStore() });
  });
  afterEach(() => cache.close());

  it.each<[string, (cache: Cache, users: ReturnType<typeof loaderOn>['users']) => Promise<unknown>]>([
    ['loader.clear(key)', (_c, users) => users.clear('42')],
    ['cache.invalidate(storeKey)', (c, users) => c.invalidate(users.storeKey('42'))],
    ['cache.invalidateTags', (c) => c.invalidateTags(['User:42'])],
    ['cache.clear()', (c) => c.clear()],
  ])('a prime issued before %s does not land after it', async (_label, invalidate) => {
    const { users, calls } = loaderOn(cache);
    const priming = users.prime('42', 'old 42'); // not awaited: still before its write
    await invalidate(cache, users);
    expect(await users.load('42')).toBe('fresh 42');
    await priming;
    expect(await users.load('42')).toBe('fresh 42');
    expect(calls).toEqual([['42']]);
  });

  it('a later prime of the key wins over an earlier one still in flight', async () => {
    const { users, calls } = loaderOn(cache);
    const first = users.prime('7', 'first');
    await users.prime('7', 'second');
    await first;
    expect(await users.load('7')).toBe('second');
    expect(calls).toEqual([]);
  });

  it('primes of other keys, and an invalidation of another key, hold none back', async () => {
    const { users, calls } = loaderOn(cache);
    const ids = Array.from({ length: 20 }, (_, i) => String(i));
    const priming = ids.map((id) => users.prime(id, `primed ${id}`));
    await users.clear('other');
    await cache.invalidateTags(['User:other']);
    await Promise.all(priming);
    expect(await users.loadMany(ids)).toEqual(ids.map((id) => `primed ${id}`));
    expect(calls).toEqual([]);
  });
});

import { createCache, memoryStore, type Entry, type Store } from '../../src/core';
import { asyncStore, deferred, flush } from '../helpers';

describe('tags', () => {
  it('invalidateTags makes every entry with that tag a miss, and only those', async () => {
    const store = memoryStore();
    const cache = createCache({ ttl: Infinity, store });
    let version = 1;
    const users = cache.loader<number, string>({
      name: 'user',
      batch: async (ids) => ids.map((id) => `u${id} v${version}`),
      tags: (id) => [`User:${id}`, 'Users'],
    });
    await users.loadMany([1, 2]);
    await cache.getOrCompute('profile:1', async () => `p1 v${version}`, { tags: ['User:1'] });
    await cache.getOrCompute('other', async () => `o v${version}`);
    version = 2;
    await cache.invalidateTags(['User:1']);
    expect(await users.loadMany([1, 2])).toEqual(['u1 v2', 'u2 v1']);
    expect(await cache.getOrCompute('profile:1', async () => `p1 v${version}`, { tags: ['User:1'] })).toBe('p1 v2');
    expect(await cache.getOrCompute('other', async () => `o v${version}`)).toBe('o v1');
    await cache.invalidateTags(['Users']);
    expect(await users.loadMany([1, 2])).toEqual(['u1 v2', 'u2 v2']);
  });

  it('a fill in flight for a tagged value is abandoned: its result is not written, its waiters start over', async () => {
    const store = memoryStore();
    const cache = createCache({ ttl: Infinity, store });
    const gate = deferred<string>();
    let calls = 0;
    const fill = () => (++calls === 1 ? gate.promise : Promise.resolve('after'));
    const before = cache.getOrCompute('k', fill, { tags: ['T'] });
    await flush();
    await cache.invalidateTags(['T']);
    gate.resolve('before');
    expect(await before).toBe('after');
    await flush();
    expect(store.getSync('k')!.value).toBe('after');
  });

  it('the memory store keeps nothing per tag for writes (eviction bounds the tagged entries), only the invalidated tags', async () => {
    const store = memoryStore({ max: 10 });
    const cache = createCache({ ttl: Infinity, store });
    await Promise.all(
      Array.from({ length: 100 }, (_, i) => cache.getOrCompute(`k${i}`, async () => i, { tags: [`T${i}`] })),
    );
    expect(store.size).toBe(10);
    expect(store.tagCount).toBe(0);
    await cache.invalidateTags(['T99', 'T0']);
    expect(store.tagCount).toBe(2);
    expect(await cache.getOrCompute('k99', async () => 'again', { tags: ['T99'] })).toBe('again');
    expect(await cache.getOrCompute('k98', async () => 'again', { tags: ['T98'] })).toBe(98);
  });

  it('on a tag-versioned store, versions read before the fill are recorded; a bump during the fill makes the write a miss', async () => {
    // A minimal versioned store: entries in memory, tag versions in a map (what Redis does with INCR).
    const inner = memoryStore();
    const versions = new Map<string, number>();
    const { store: base } = asyncStore(inner);
    const store: Store = {
      ...base,
      name: 'versioned',
      async tagVersions(tags) {
        return tags.map((tag) => versions.get(tag) ?? 0);
      },
      async invalidateTags(tags) {
        for (const tag of tags) versions.set(tag, (versions.get(tag) ?? 0) + 1);
      },
    };
    const cache = createCache({ ttl: Infinity, store });
    const gate = deferred<string>();
    const first = cache.getOrCompute('k', () => gate.promise, { tags: ['T'] });
    await flush();
    // Another replica invalidates while the fill runs (not visible to this process's flights).
    versions.set('T', 1);
    gate.resolve('old');
    expect(await first).toBe('old');
    await flush();
    const written = inner.getSync('k') as Entry;
    expect(written.tags).toEqual(['T']);
    expect(written.tagVersions).toEqual([0]);
    // The written entry carries version 0, T is at 1: a miss.
    expect(await cache.getOrCompute('k', async () => 'new', { tags: ['T'] })).toBe('new');
    expect(inner.getSync('k')!.tagVersions).toEqual([1]);
    expect(await cache.getOrCompute('k', async () => 'unused', { tags: ['T'] })).toBe('new');
  });

  it('when tag versions cannot be read the value is served but not cached', async () => {
    const inner = memoryStore();
    const { store: base } = asyncStore(inner);
    const store: Store = {
      ...base,
      async tagVersions() {
        throw new Error('down');
      },
      async invalidateTags() {},
    };
    const cache = createCache({ ttl: Infinity, store });
    expect(await cache.getOrCompute('k', async () => 'v', { tags: ['T'] })).toBe('v');
    await flush();
    expect(inner.getSync('k')).toBeUndefined();
    expect(cache.metrics().total.storeErrors).toBe(1);
  });

  it('bad tags are rejected naming the option; a store without tag support refuses tags at configuration', async () => {
    const cache = createCache({ ttl: Infinity });
    await expect(cache.getOrCompute('k', async () => 1, { tags: 'User:1' as never })).rejects.toThrow(
      /option "tags" must be an array of non-empty strings, got "User:1"/,
    );
    await expect(cache.invalidateTags(['ok', ''])).rejects.toThrow(
      /argument "tags" must be an array of non-empty strings, got array\(2\) whose item 1 is ""/,
    );
    await expect(cache.getOrCompute('k', async () => 1, { tags: ['ok', 5] as never })).rejects.toThrow(
      /option "tags" must be an array of non-empty strings, got array\(2\) whose item 1 is 5/,
    );
    const users = cache.loader<number, number>({ name: 'u', batch: async (ids) => ids, tags: () => [42 as never] });
    await expect(users.load(1)).rejects.toThrow(
      /option "tags" must be an array of non-empty strings, got array\(1\) whose item 0 is 42/,
    );
    const inner = memoryStore();
    const bare = createCache({
      ttl: Infinity,
      store: {
        name: 'bare',
        getMany: (keys) => inner.getMany(keys),
        setMany: (writes) => inner.setMany(writes),
        delete: (keys) => inner.delete(keys),
        clear: () => inner.clear(),
      },
    });
    expect(() =>
      bare.loader({ name: 'x', batch: async (ids: readonly number[]) => ids, tags: (id) => [`X:${id}`] }),
    ).toThrow(expect.objectContaining({ code: 'E_UNSUPPORTED' }));
  });
});

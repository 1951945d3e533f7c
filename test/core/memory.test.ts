import {
  MEMORY_STORE_DEFAULT_MAX,
  MEMORY_STORE_MAX_ENTRIES,
  createCache,
  manualClock,
  memoryStore,
} from '../../src/core';
import { entry } from '../helpers';

describe('memory store', () => {
  it('is bounded: least recently used entries are evicted past max', async () => {
    const store = memoryStore({ max: 3 });
    await store.setMany(['a', 'b', 'c'].map((k) => ({ key: k, entry: entry(k), ttl: Infinity })));
    store.getSync('a'); // a is now the most recently used
    await store.setMany([{ key: 'd', entry: entry('d'), ttl: Infinity }]);
    expect(store.size).toBe(3);
    expect(store.getSync('b')).toBeUndefined();
    expect(store.getSync('a')?.value).toBe('a');
  });

  it('defaults to 10000 entries, for memoryStore() and for the cache without a store', async () => {
    const store = memoryStore();
    const bounded = createCache({ ttl: Infinity, store });
    const byDefault = createCache({ ttl: Infinity });
    for (const cache of [bounded, byDefault]) {
      await Promise.all(Array.from({ length: 10_001 }, (_, i) => cache.getOrCompute(`k${i}`, async () => i)));
    }
    expect(store.size).toBe(10_000);
    expect(MEMORY_STORE_DEFAULT_MAX).toBe(store.size);
    // The default cache's store: the newest key is still there, the oldest was evicted.
    let fills = 0;
    const fill = async (): Promise<number> => {
      fills++;
      return -1;
    };
    expect(await byDefault.getOrCompute('k10000', fill)).toBe(10_000);
    expect(await byDefault.getOrCompute('k0', fill)).toBe(-1);
    expect(fills).toBe(1);
  });

  it('hits return the stored object itself: no serialization', async () => {
    const cache = createCache({ ttl: Infinity });
    const value = { nested: { list: [1, 2, 3] }, when: new Date(0) };
    await cache.getOrCompute('k', async () => value);
    const hit = await cache.getOrCompute('k', async () => ({ nested: { list: [] }, when: new Date(1) }));
    expect(hit).toBe(value);
    expect(hit.when).toBeInstanceOf(Date);
  });

  it('a hit reuses one settled promise per entry: nothing is allocated per hit', async () => {
    const cache = createCache({ ttl: Infinity });
    const fill = async () => 'v';
    await cache.getOrCompute('k', fill);
    const first = cache.getOrCompute('k', fill);
    expect(cache.getOrCompute('k', fill)).toBe(first);
    expect(await first).toBe('v');
  });

  it('is TTL and grace aware through the entry: past grace an entry is a miss and is overwritten', async () => {
    const clock = manualClock();
    const store = memoryStore();
    const cache = createCache({ clock, store, ttl: 100, swr: 100 });
    await cache.getOrCompute('k', async () => 'v1');
    expect(store.getSync('k')).toMatchObject({ freshUntil: clock.now() + 100, staleUntil: clock.now() + 200 });
    clock.advance(250);
    expect(await cache.getOrCompute('k', async () => 'v2')).toBe('v2');
    expect(store.getSync('k')!.value).toBe('v2');
  });

  it('writes and deletes take effect before the returned promise settles', () => {
    const store = memoryStore();
    void store.setMany([{ key: 'k', entry: entry(1), ttl: Infinity }]);
    expect(store.getSync('k')?.value).toBe(1);
    void store.delete(['k']);
    expect(store.getSync('k')).toBeUndefined();
  });

  it('rejects a bad max naming the option', () => {
    expect(() => memoryStore({ max: 0 })).toThrow(/option "max" must be a positive integer at most 10,000,000, got 0/);
    expect(() => memoryStore({ max: 1.5 })).toThrow(/got 1.5/);
  });

  it('refuses a max past MEMORY_STORE_MAX_ENTRIES: lru-cache would allocate its tables for it at once', () => {
    // 2 ** 31 aborted the process ("invalid table size", no try/catch sees it); 1e7 + 1 cost ~270 MB.
    for (const max of [MEMORY_STORE_MAX_ENTRIES + 1, 2 ** 31 - 1, 2 ** 31]) {
      let error: unknown;
      try {
        memoryStore({ max });
      } catch (thrown) {
        error = thrown;
      }
      expect(error).toMatchObject({ code: 'E_INVALID_OPTION' });
      expect((error as Error).message).toContain(`option "max" must be a positive integer at most 10,000,000`);
      expect((error as Error).message).toContain(`got ${max}`);
      expect((error as Error).message).toContain('allocates its tables for max entries up front');
    }
    expect(MEMORY_STORE_MAX_ENTRIES).toBe(10_000_000);
  });

  describe('tags, checked when read', () => {
    const tagged = (value: string, tags: string[]) => ({ ...entry(value), tags });
    const write = (store: ReturnType<typeof memoryStore>, key: string, tags: string[]) =>
      store.setMany([{ key, entry: tagged(key, tags), ttl: Infinity }]);

    it('invalidateTags makes a miss of the entries that carry the tag now (a key rewritten without it stays)', async () => {
      const store = memoryStore();
      await store.setMany([
        { key: 'a', entry: tagged('a1', ['T', 'U']), ttl: Infinity },
        { key: 'b', entry: tagged('b1', ['T']), ttl: Infinity },
      ]);
      await store.setMany([{ key: 'a', entry: tagged('a2', ['U']), ttl: Infinity }]); // 'a' no longer carries T
      await store.invalidateTags(['T']);
      expect(store.getSync('a')?.value).toBe('a2');
      expect(store.getSync('b')).toBeUndefined();
      expect((await store.getMany(['a', 'b'])).map((e) => e?.value)).toEqual(['a2', undefined]);
      await store.invalidateTags(['U']);
      expect(await store.getMany(['a'])).toEqual([undefined]);
      expect(store.size).toBe(0); // read as missing: deleted
    });

    it('an entry written after the invalidation is not touched by it, nor by one of another tag', async () => {
      const store = memoryStore();
      await write(store, 'old', ['T']);
      await store.invalidateTags(['T']);
      await write(store, 'new', ['T']);
      await store.invalidateTags(['V']);
      expect(store.getSync('old')).toBeUndefined();
      expect(store.getSync('new')?.value).toBe('new');
      await store.invalidateTags(['T']);
      expect(store.getSync('new')).toBeUndefined();
    });

    it('an entry checked valid stays valid until a later invalidation of its tag, read or not in between', async () => {
      const store = memoryStore();
      await write(store, 'k', ['T']);
      await store.invalidateTags(['U']);
      expect(store.getSync('k')?.value).toBe('k'); // checked: U is not its tag
      await store.invalidateTags(['W']);
      await store.invalidateTags(['T']);
      expect(store.getSync('k')).toBeUndefined();
    });

    it('invalidateTags deletes nothing itself: an invalidated entry leaves when read or evicted (the bounds still hold)', async () => {
      const store = memoryStore({ max: 3 });
      for (const key of ['a', 'b', 'c']) await write(store, key, ['T']);
      await store.invalidateTags(['T']);
      expect(store.size).toBe(3);
      await write(store, 'd', ['T']);
      expect(store.size).toBe(3);
      expect(store.getSync('d')?.value).toBe('d');
      expect(store.getSync('b')).toBeUndefined();
      expect(store.size).toBe(2);
    });

    it('the same entry set again keeps its check: invalidating its tag still makes it a miss', async () => {
      const store = memoryStore();
      const e = tagged('v', ['T']);
      await store.setMany([{ key: 'k', entry: e, ttl: Infinity }]);
      await store.invalidateTags(['T']);
      await store.setMany([{ key: 'k', entry: e, ttl: Infinity }]); // a write of the very entry checked before
      await store.invalidateTags(['T']);
      expect(store.getSync('k')).toBeUndefined();
    });

    it('checks the tags as written: a tags array the caller changes later changes nothing', async () => {
      const store = memoryStore();
      const tags = ['x'];
      await store.setMany([
        { key: 'a', entry: tagged('a', tags), ttl: Infinity },
        { key: 'b', entry: tagged('b', tags), ttl: Infinity },
      ]);
      tags[0] = 'y';
      await store.invalidateTags(['y']);
      expect((await store.getMany(['a', 'b'])).map((e) => e?.value)).toEqual(['a', 'b']);
      await store.invalidateTags(['x']);
      expect(await store.getMany(['a', 'b'])).toEqual([undefined, undefined]);
    });

    it('past 50,000 noted tags, sweeps: the invalidated entries go, unrelated ones stay however cold, the notes are dropped', async () => {
      const store = memoryStore();
      await write(store, 'cold', ['Unrelated']); // written at count 0, never read
      await write(store, 'hit', ['User:7']); // its tag is invalidated below, before the sweep
      await write(store, 'read', ['C']);
      for (let i = 0; i < 25_000; i++) await store.invalidateTags([`User:${i + 1_000}`]);
      expect(store.getSync('read')?.value).toBe('read');
      await store.invalidateTags(['User:7']);
      for (let i = 25_000; i < 49_999; i++) await store.invalidateTags([`User:${i + 1_000}`]);
      expect(store.tagCount).toBe(50_000);
      expect(store.size).toBe(3); // nothing deleted by invalidateTags itself
      await store.invalidateTags(['User:999999']); // the 50,001st note: swept
      expect(store.tagCount).toBe(0);
      expect(store.size).toBe(2); // 'hit' deleted by the sweep
      expect(store.getSync('cold')?.value).toBe('cold');
      expect(store.getSync('read')?.value).toBe('read');
      expect(store.getSync('hit')).toBeUndefined();
      // After the sweep, invalidations still reach what was swept and kept.
      await store.invalidateTags(['Unrelated']);
      expect(store.getSync('cold')).toBeUndefined();
      expect(store.getSync('read')?.value).toBe('read');
    });

    it('sweeps past 4 Mi characters of noted tags too (long tags, fewer than 50,000)', async () => {
      const store = memoryStore();
      await write(store, 'k', ['K']);
      const long = (i: number) => `${i}:${'x'.repeat(1_000)}`;
      for (let i = 0; i < 4_000; i++) await store.invalidateTags([long(i)]);
      expect(store.tagCount).toBe(4_000);
      for (let i = 4_000; i < 4_300; i++) await store.invalidateTags([long(i)]);
      expect(store.tagCount).toBeLessThan(300); // swept once past 4 Mi characters
      expect(store.getSync('k')?.value).toBe('k');
    });

    it('the same entry written again after an invalidation is valid as of that write', async () => {
      const store = memoryStore();
      const e = tagged('v', ['T']);
      await store.setMany([{ key: 'k', entry: e, ttl: Infinity }]);
      await store.invalidateTags(['T']);
      await store.setMany([{ key: 'k', entry: e, ttl: Infinity }]);
      expect(store.getSync('k')?.value).toBe('v');
    });

    it('a long tag is noted by its bounded form', async () => {
      const store = memoryStore();
      const long = 'T'.repeat(5_000);
      await write(store, 'k', [long]);
      await store.invalidateTags([long]);
      expect(store.getSync('k')).toBeUndefined();
      expect(store.tagCount).toBe(1);
    });

    it('clear() forgets the notes', async () => {
      const store = memoryStore();
      await store.invalidateTags(['T', 'U']);
      expect(store.tagCount).toBe(2);
      await store.clear();
      expect(store.tagCount).toBe(0);
      await write(store, 'k', ['T']);
      expect(store.getSync('k')?.value).toBe('k');
    });
  });
});

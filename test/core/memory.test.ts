import { MEMORY_STORE_DEFAULT_MAX, createCache, manualClock, memoryStore } from '../../src/core';
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
    expect(() => memoryStore({ max: 0 })).toThrow(/option "max" must be a positive integer, got 0/);
    expect(() => memoryStore({ max: 1.5 })).toThrow(/got 1.5/);
  });

  describe('tag index', () => {
    const tagged = (value: string, tags: string[]) => ({ ...entry(value), tags });

    it('invalidateTags deletes only the entries that carry the tag now (a key rewritten without it stays)', async () => {
      const store = memoryStore();
      await store.setMany([
        { key: 'a', entry: tagged('a1', ['T', 'U']), ttl: Infinity },
        { key: 'b', entry: tagged('b1', ['T']), ttl: Infinity },
      ]);
      await store.setMany([{ key: 'a', entry: tagged('a2', ['U']), ttl: Infinity }]); // 'a' no longer carries T
      await store.invalidateTags(['T']);
      expect(store.getSync('a')?.value).toBe('a2');
      expect(store.getSync('b')).toBeUndefined();
      expect(store.tagCount).toBe(1); // U, carried by 'a'
      await store.invalidateTags(['U']);
      expect(store.getSync('a')).toBeUndefined();
      expect(store.tagCount).toBe(0);
      expect(store.tagIndexLength).toBe(0);
    });

    it('the same entry set again is indexed once: deleting it empties the index', async () => {
      const store = memoryStore();
      const e = tagged('v', ['T']);
      await store.setMany([{ key: 'k', entry: e, ttl: Infinity }]);
      await store.setMany([{ key: 'k', entry: e, ttl: Infinity }]);
      await store.delete(['k']);
      expect(store.tagCount).toBe(0);
      expect(store.tagIndexLength).toBe(0);
    });

    it('stays bounded by the entries carrying each tag: rewrites and evictions compact the lists', async () => {
      const store = memoryStore({ max: 5 });
      for (let i = 0; i < 1_000; i++) await store.setMany([{ key: 'k', entry: tagged(`v${i}`, ['T']), ttl: Infinity }]);
      expect(store.tagCount).toBe(1);
      expect(store.tagIndexLength).toBeLessThanOrEqual(2 * 1 + 16 + 1);
      for (let i = 0; i < 1_000; i++)
        await store.setMany([{ key: `e${i}`, entry: tagged('x', ['T', `E${i}`]), ttl: Infinity }]);
      expect(store.size).toBe(5);
      expect(store.tagCount).toBe(6); // T and the five held E tags
      expect(store.tagIndexLength).toBeLessThanOrEqual(5 + (2 * 5 + 16 + 1));
      await store.invalidateTags(['T']);
      expect(store.size).toBe(0);
      expect(store.tagCount).toBe(0);
      expect(store.tagIndexLength).toBe(0);
    });

    it('writes indexed in batches: one overwritten or deleted before its batch is indexed is counted right', async () => {
      const store = memoryStore();
      const write = (key: string, tags: string[]) => store.setMany([{ key, entry: tagged(key, tags), ttl: Infinity }]);
      for (let i = 0; i < 300; i++) await write(`k${i}`, ['T']); // a batch indexed, 44 noted
      await write('k290', ['U']); // noted, replaced by an entry without T before being indexed
      await write('k10', ['U']); // indexed, replaced
      await store.delete(['k295', 'k20']);
      expect(store.tagCount).toBe(2);
      await store.invalidateTags(['T']);
      expect(store.size).toBe(2);
      expect(store.getSync('k290')?.value).toBe('k290');
      expect(store.getSync('k10')?.value).toBe('k10');
      expect(store.tagCount).toBe(1);
      await store.invalidateTags(['U']);
      expect(store.size).toBe(0);
      expect(store.tagCount).toBe(0);
      expect(store.tagIndexLength).toBe(0);
    });

    it('indexes the tags as written: a tags array the caller changes later changes nothing', async () => {
      const store = memoryStore();
      const tags = ['x'];
      await store.setMany([
        { key: 'a', entry: tagged('a', tags), ttl: Infinity },
        { key: 'b', entry: tagged('b', tags), ttl: Infinity },
      ]);
      tags[0] = 'y';
      await store.invalidateTags(['y']);
      expect(store.size).toBe(2);
      await store.invalidateTags(['x']);
      expect(store.size).toBe(0);
      expect(store.tagCount).toBe(0);
      expect(store.tagIndexLength).toBe(0);
    });

    it('clear() empties it', async () => {
      const store = memoryStore();
      await store.setMany([{ key: 'k', entry: tagged('v', ['T', 'U']), ttl: Infinity }]);
      await store.clear();
      expect(store.tagCount).toBe(0);
      expect(store.tagIndexLength).toBe(0);
    });
  });
});

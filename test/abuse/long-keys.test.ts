/**
 * Long keys are held in process as digests (src/core/long-keys.ts), and the memory store is bounded
 * in estimated bytes (maxSize, maxEntrySize; src/core/sizes.ts). retained.test.ts measures the heap;
 * this file checks the rules: one digest per key, distinct keys apart, a raw key never equal to a
 * digest, namespaces kept, the same key on every path (load, invalidate, loader.clear), eviction by
 * bytes, oversized entries refused and counted, options validated.
 */
import { createCache, memoryStore } from '../../src/core';
import { HASHED_KEY_LENGTH, LONG_KEY_MAX, boundedKey, digestKey } from '../../src/core/long-keys';
import { SIZE_WALK_NODES, entrySize, valueSize } from '../../src/core/sizes';
import { cachedFieldKey } from '../../src/graphql/keys';
import { entry } from '../helpers';

const long = (fill: string, length = LONG_KEY_MAX + 1) => fill.repeat(Math.ceil(length / fill.length)).slice(0, length);

describe('boundedKey', () => {
  it('keeps keys up to LONG_KEY_MAX characters as they are', () => {
    const key = long('k', LONG_KEY_MAX);
    expect(boundedKey(key)).toBe(key);
    expect(boundedKey('user:1')).toBe('user:1');
  });

  it('replaces a longer key by its readable head and sha256, the same every time', () => {
    const key = long('abc');
    const bounded = boundedKey(key);
    expect(bounded).toHaveLength(HASHED_KEY_LENGTH);
    expect(bounded.startsWith(key.slice(0, 64))).toBe(true);
    expect(bounded).toMatch(/\u2026#[A-Za-z0-9_-]{43}$/);
    expect(boundedKey(long('abc'))).toBe(bounded);
  });

  it('keeps distinct long keys apart, however late they differ', () => {
    const a = long('x', 5000);
    const b = `${a.slice(0, -1)}y`;
    expect(boundedKey(a)).not.toBe(boundedKey(b));
    expect(boundedKey(a)).not.toBe(boundedKey(`${a}x`));
    // Lone surrogates are hashed as UTF-16: '\uD800' and '\uDBFF' stay two keys.
    expect(boundedKey(`${a}\uD800`)).not.toBe(boundedKey(`${a}\uDBFF`));
  });

  it('never gives a raw key the digest of another: a raw key that looks like one is hashed too', () => {
    const digest = boundedKey(long('v'));
    expect(digest.length).toBeLessThan(LONG_KEY_MAX);
    expect(boundedKey(digest)).not.toBe(digest);
    expect(boundedKey(digest)).toBe(digestKey(digest));
    // One character off the pattern: stored raw.
    expect(boundedKey(`${digest.slice(0, -1)}=`)).toBe(`${digest.slice(0, -1)}=`);
  });

  it('keeps a namespaced key in its namespace and a raw key out of them', () => {
    const field = cachedFieldKey('Query.q', { session: long('s') });
    expect(field.startsWith('\0field\0')).toBe(true);
    expect(boundedKey(field).startsWith('\0field\0')).toBe(true);
    expect(boundedKey(long('r')).charCodeAt(0)).not.toBe(0);
  });

  it('does not cut a surrogate pair in the head', () => {
    const key = `${'a'.repeat(63)}\u{1F600}${long('b')}`;
    const head = boundedKey(key).split('\u2026#')[0]!;
    expect(head).toBe('a'.repeat(63));
  });
});

describe('long keys through the registry', () => {
  it('one fill per long key; invalidate and loader.clear take the key as given', async () => {
    const keys: string[] = [];
    const cache = createCache({ ttl: 60_000, hooks: { onMiss: (key) => keys.push(key) } });
    const key = long('g', 100_000);
    let fills = 0;
    const fill = () => ++fills;
    expect(await cache.getOrCompute(key, fill)).toBe(1);
    expect(await cache.getOrCompute(long('g', 100_000), fill)).toBe(1);
    expect(keys).toEqual([boundedKey(key)]); // hooks see the key as it is held
    await cache.invalidate(key);
    expect(await cache.getOrCompute(key, fill)).toBe(2);

    let batches = 0;
    const users = cache.loader<string, number>({ name: 'users', batch: (ks) => ks.map(() => ++batches) });
    const id = long('u', 50_000);
    expect(await users.load(id)).toBe(1);
    expect(await users.load(id)).toBe(1);
    await users.clear(id);
    expect(await users.load(id)).toBe(2);
    await cache.invalidate(users.storeKey(id));
    expect(await users.load(id)).toBe(3);
  });

  it("a raw key spelling another key's digest gets its own value", async () => {
    const cache = createCache({ ttl: 60_000 });
    const key = long('p', 10_000);
    expect(await cache.getOrCompute(key, () => 'victim')).toBe('victim');
    expect(await cache.getOrCompute(boundedKey(key), () => 'other')).toBe('other');
    expect(await cache.getOrCompute(key, () => 'refilled')).toBe('victim');
  });

  it('still refuses a raw key starting with U+0000, long or not', async () => {
    const cache = createCache({ ttl: 60_000 });
    await expect(cache.getOrCompute(`\0field\0${long('z')}`, () => 1)).rejects.toMatchObject({ code: 'E_INVALID_KEY' });
  });

  it('the memory store holds the digest, and a long tag is noted by its digest', async () => {
    const store = memoryStore();
    const cache = createCache({ ttl: 60_000, store });
    const tag = long('t', 20_000);
    const key = long('k', 20_000);
    let fills = 0;
    await cache.getOrCompute(key, () => ++fills, { tags: [tag] });
    expect(store.getSync(boundedKey(key))?.value).toBe(1);
    expect(store.getSync(key)).toBeUndefined();
    // A tag spelling the long tag's digest is another tag.
    await cache.invalidateTags([boundedKey(tag)]);
    expect(await cache.getOrCompute(key, () => ++fills, { tags: [tag] })).toBe(1);
    await cache.invalidateTags([tag]);
    expect(store.tagCount).toBe(2); // the two notes, each a bounded form
    expect(await cache.getOrCompute(key, () => ++fills, { tags: [tag] })).toBe(2);
  });
});

describe('memory store bounded in bytes', () => {
  it('evicts the least recently used entries past maxSize', async () => {
    const store = memoryStore({ maxSize: 10_000, maxEntrySize: 10_000 });
    const value = (c: string) => c.repeat(3000);
    await store.setMany(['a', 'b', 'c'].map((k) => ({ key: k, entry: entry(value(k)), ttl: Infinity })));
    expect(store.size).toBe(3);
    store.getSync('a'); // a is now the most recently used
    await store.setMany([{ key: 'd', entry: entry(value('d')), ttl: Infinity }]);
    expect(store.size).toBe(3);
    expect(store.calculatedSize).toBeLessThanOrEqual(10_000);
    expect(store.getSync('b')).toBeUndefined();
    expect(store.getSync('a')?.value).toBe(value('a'));
    // Small entries: many fit in the same bytes.
    await store.setMany(Array.from({ length: 50 }, (_, i) => ({ key: `s${i}`, entry: entry(i), ttl: Infinity })));
    expect(store.getSync('s0')?.value).toBe(0);
  });

  it('does not store an entry larger than maxEntrySize (counted), nor keep the older one of its key', async () => {
    const store = memoryStore({ maxSize: 100_000, maxEntrySize: 5_000 });
    await store.setMany([{ key: 'k', entry: entry('small', Infinity), ttl: Infinity }]);
    await store.setMany([{ key: 'k', entry: entry('x'.repeat(6_000)), ttl: Infinity }]);
    expect(store.getSync('k')).toBeUndefined();
    expect(store.oversized).toBe(1);
    expect(store.size).toBe(0);
  });

  it('an oversized value through the cache: answered, not stored, filled again next time', async () => {
    const store = memoryStore({ maxSize: 1 << 20 });
    const cache = createCache({ ttl: 60_000, store });
    let fills = 0;
    const big = () => (++fills, 'x'.repeat(200_000)); // > 1 MiB / 8
    expect(await cache.getOrCompute('big', big)).toHaveLength(200_000);
    expect(await cache.getOrCompute('big', big)).toHaveLength(200_000);
    expect(fills).toBe(2);
    expect(store.oversized).toBe(2);
  });

  it('defaults to 64 MiB, maxEntrySize an eighth of maxSize', async () => {
    const store = memoryStore();
    await store.setMany([{ key: 'k', entry: entry('x'.repeat(8 * 1024 * 1024)), ttl: Infinity }]);
    expect(store.oversized).toBe(1);
    await store.setMany([{ key: 'k', entry: entry('x'.repeat(8 * 1024 * 1024 - 1024)), ttl: Infinity }]);
    expect(store.oversized).toBe(1);
    expect(store.size).toBe(1);
  });

  it('validates maxSize and maxEntrySize', () => {
    for (const bad of [0, -1, 1.5, Infinity, '1', null]) {
      expect(() => memoryStore({ maxSize: bad as never })).toThrow(
        expect.objectContaining({
          code: 'E_INVALID_OPTION',
          message: expect.stringContaining('option "maxSize" must be a positive integer'),
        }),
      );
      expect(() => memoryStore({ maxEntrySize: bad as never })).toThrow(
        expect.objectContaining({
          code: 'E_INVALID_OPTION',
          message: expect.stringContaining('option "maxEntrySize"'),
        }),
      );
    }
    expect(() => memoryStore({ maxSize: 100, maxEntrySize: 101 })).toThrow(
      /option "maxEntrySize" must be a positive integer \(bytes\) no larger than maxSize \(100\), got 101/,
    );
    expect(memoryStore({ maxSize: 1 }).size).toBe(0);
  });
});

describe('entry size estimate', () => {
  it('counts strings by length, and key and tags with the value', () => {
    expect(valueSize('x'.repeat(1 << 20))).toBeGreaterThanOrEqual(1 << 20);
    const e = { ...entry('v'), tags: ['t'.repeat(1000)] };
    expect(entrySize('k'.repeat(500), e)).toBeGreaterThan(1500);
  });

  it('stays bounded on large and deep values, and scales what it did not visit', () => {
    const rows = Array.from({ length: 100_000 }, (_, i) => ({ id: i, name: `name-${i}` }));
    const estimate = valueSize(rows);
    expect(estimate).toBeGreaterThan(100_000 * 40); // every row counted, though few were visited
    expect(valueSize(rows.slice(0, 10))).toBeLessThan(10 * 200);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 10_000; i++) deep = { deep };
    expect(() => valueSize(deep)).not.toThrow();
    const wide: Record<string, string> = {};
    for (let i = 0; i < SIZE_WALK_NODES * 4; i++) wide[`k${i}`] = 'v'.repeat(100);
    expect(valueSize(wide)).toBeGreaterThan(SIZE_WALK_NODES * 4 * 100);
  });
});

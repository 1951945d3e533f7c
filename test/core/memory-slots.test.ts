/**
 * The memory store's slots (readSlot): a @cached field's key, per parent, is answered again from
 * its slot while its entry stays, with no lookup; a change to the key (a write, a delete, an
 * eviction) empties its slot, and invalidateTags and clear fail every slot, so no change is missed
 * and no dropped entry is kept alive; writes of other keys leave it; the LRU order still moves a
 * key read only from its slot up each time an eighth of the store was written. Counted in getSync calls
 * and values, never timed.
 */
import { MemoKey } from '../../src/core/memo';
import { memoryStore, type MemoryStore } from '../../src/core/memory';
import { entry } from '../helpers';

const write = (store: MemoryStore, key: string, value: unknown, tags?: string[]) =>
  store.setMany([{ key, entry: { ...entry(value), tags }, ttl: Infinity }]);

describe('memory store: slots', () => {
  it('answers a slot again without a lookup while its entry stays, and looks up again after a change of its key', async () => {
    const store = memoryStore();
    await write(store, 'a', 1);
    const lookups = jest.spyOn(store, 'getSync');
    const slot = new MemoKey('a');
    const first = store.readSlot(slot);
    expect(first?.value).toBe(1);
    expect(store.readSlot(slot)).toBe(first);
    expect(store.readSlot(slot)).toBe(first);
    expect(lookups).toHaveBeenCalledTimes(1);
    await write(store, 'other', 2); // another key: the slot still answers
    expect(store.readSlot(slot)).toBe(first);
    expect(lookups).toHaveBeenCalledTimes(1);
    await write(store, 'a', 3); // its key: read again
    expect(store.readSlot(slot)?.value).toBe(3);
    expect(lookups).toHaveBeenCalledTimes(2);
  });

  it('a missing key is looked up every time (nothing is kept for it)', async () => {
    const store = memoryStore();
    const lookups = jest.spyOn(store, 'getSync');
    const slot = new MemoKey('absent');
    expect(store.readSlot(slot)).toBeUndefined();
    expect(store.readSlot(slot)).toBeUndefined();
    expect(lookups).toHaveBeenCalledTimes(2);
    await write(store, 'absent', 'now');
    expect(store.readSlot(slot)?.value).toBe('now');
  });

  // [change, what the slot of `a` reads after it, whether the slot is read again (a lookup), whether
  // it is emptied at once (its entry dropped by the store), whether the slot of `b` is emptied]
  const changes: [string, (store: MemoryStore) => Promise<void>, unknown, boolean, boolean, boolean][] = [
    ['a write of the same key', (store) => write(store, 'a', 'new'), 'new', true, true, false],
    ['a write of another key', (store) => write(store, 'b', 'b2'), 'old', false, false, true],
    ['a write of a third key', (store) => write(store, 'c', 'c'), 'old', false, false, false],
    ['a delete of the key', (store) => store.delete(['a']), undefined, true, true, false],
    ['a delete of another key', (store) => store.delete(['b']), 'old', false, false, true],
    ['an invalidation of its tag', (store) => store.invalidateTags(['t']), undefined, true, false, false],
    ['an invalidation of another tag', (store) => store.invalidateTags(['u']), 'old', true, false, false],
    ['a clear', (store) => store.clear(), undefined, true, true, true],
  ];

  it.each(changes)(
    'after %s the slot reads what the store holds',
    async (_name, change, after, readAgain, emptied, otherEmptied) => {
      const store = memoryStore();
      // Twenty entries more: the few writes here stay within a slot's recency window.
      for (let i = 0; i < 20; i++) await write(store, `filler${i}`, i);
      await write(store, 'a', 'old', ['t']);
      await write(store, 'b', 'b');
      const slot = new MemoKey('a');
      const other = new MemoKey('b');
      expect(store.readSlot(slot)?.value).toBe('old');
      expect(store.readSlot(other)?.value).toBe('b');
      await change(store);
      // Emptied at once when the store dropped its entry: not kept alive by the slot until its next read.
      expect(slot.entry === undefined).toBe(emptied);
      expect(other.entry === undefined).toBe(otherEmptied);
      const lookups = jest.spyOn(store, 'getSync');
      expect(store.readSlot(slot)?.value).toBe(after);
      expect(lookups).toHaveBeenCalledTimes(readAgain ? 1 : 0);
      expect(store.getSync('a')?.value).toBe(after);
    },
  );

  it('an eviction empties the slot of the key evicted: its entry is not answered, nor kept', async () => {
    const store = memoryStore({ max: 2 });
    await write(store, 'a', 'a');
    await write(store, 'b', 'b');
    const slot = new MemoKey('a');
    expect(store.readSlot(slot)?.value).toBe('a');
    await write(store, 'c', 'c'); // evicts b (a was read since)
    await write(store, 'd', 'd'); // evicts a
    expect(slot.entry).toBeUndefined();
    expect(store.readSlot(slot)).toBeUndefined();
    expect(store.size).toBe(2);
  });

  it('LRU order: every eighth of the store written, a key read from its slot is moved up (a lookup), so writes never evict it', async () => {
    const store = memoryStore({ max: 16 }); // an eighth: 2 writes
    const first = Array.from({ length: 16 }, (_, i) => `k${i}`);
    for (const key of first) await write(store, key, key); // k0 the least recent
    const slot = new MemoKey('k0');
    const lookups = jest.spyOn(store, 'getSync');
    expect(store.readSlot(slot)?.value).toBe('k0'); // a lookup: k0 is the most recent
    const looked: boolean[] = [];
    for (let i = 0; i < 16; i++) {
      await write(store, `new${i}`, i); // evicts the least recent other key: k1, k2, …
      const before = lookups.mock.calls.length;
      expect(store.readSlot(slot)?.value).toBe('k0');
      looked.push(lookups.mock.calls.length > before);
    }
    // From its slot after one write, a lookup (moving it up) after the second. Never moved up, k0
    // would have been evicted by the sixteenth write.
    expect(looked).toEqual(Array.from({ length: 16 }, (_, i) => i % 2 === 1));
    lookups.mockRestore();
    expect(first.slice(1).filter((key) => store.getSync(key) !== undefined)).toEqual([]);
    expect(store.size).toBe(16);
  });

  it.each([
    [2, 4],
    [4, 4],
    [6, 4],
    [100, 4],
    [4, 2],
    [100, 2],
    [101, 2],
  ])(
    'max %i: a key read from its slot once per 1/%i of max written is never evicted, however long',
    async (max, part) => {
      const store = memoryStore({ max });
      const slot = new MemoKey('hot');
      await write(store, 'hot', 'hot');
      const every = Math.max(1, Math.floor(max / part));
      let evicted = 0;
      for (let i = 0; i < 50 * every; i++) {
        await write(store, `cold${i}`, i);
        if ((i + 1) % every === 0 && store.readSlot(slot) === undefined) {
          evicted++;
          await write(store, 'hot', 'hot');
        }
      }
      // max 2: a quarter is under one write, so it is read after every write and still kept.
      expect(evicted).toBe(0);
    },
  );

  it('maxSize: large writes do not evict a key read from its slot after each of them', async () => {
    // 200 small entries, then entries of ~9,000 bytes into 40,000: each evicts many small ones.
    const store = memoryStore({ maxSize: 40_000, maxEntrySize: 10_000 });
    for (let i = 0; i < 200; i++) await write(store, `small${i}`, i);
    await write(store, 'hot', 'hot');
    const slot = new MemoKey('hot');
    expect(store.readSlot(slot)?.value).toBe('hot');
    for (let i = 0; i < 12; i++) {
      await write(store, `big${i}`, 'x'.repeat(4_400)); // ~9,000 bytes (two per character)
      expect(store.readSlot(slot)?.value).toBe('hot');
    }
    expect(store.getSync('small0')).toBeUndefined();
  });

  it('lookups of other keys leave a slot be: a store nobody writes to keeps answering from its slots', async () => {
    const store = memoryStore({ max: 4 });
    for (const key of ['a', 'b', 'c', 'd']) await write(store, key, key);
    const slot = new MemoKey('a');
    expect(store.readSlot(slot)?.value).toBe('a');
    for (let i = 0; i < 100; i++) for (const key of ['b', 'c', 'd', 'absent']) store.getSync(key);
    const lookups = jest.spyOn(store, 'getSync');
    expect(store.readSlot(slot)?.value).toBe('a');
    expect(lookups).not.toHaveBeenCalled();
  });

  it('a second slot for the same key (another cache on the store) empties the first: neither answers an old entry', async () => {
    const store = memoryStore();
    await write(store, 'k', 1);
    const one = new MemoKey('k');
    const two = new MemoKey('k');
    expect(store.readSlot(one)?.value).toBe(1);
    expect(store.readSlot(two)?.value).toBe(1);
    expect(one.entry).toBeUndefined();
    await write(store, 'k', 2);
    expect(store.readSlot(one)?.value).toBe(2);
    expect(store.readSlot(two)?.value).toBe(2);
  });

  it('a slot read by two stores in turn answers each store its own entry', async () => {
    const one = memoryStore({ max: 4 });
    const two = memoryStore({ max: 4 });
    await write(one, 'k', 1);
    await write(two, 'k', 2);
    const slot = new MemoKey('k');
    for (let i = 0; i < 20; i++) {
      expect(one.readSlot(slot)?.value).toBe(1);
      expect(two.readSlot(slot)?.value).toBe(2);
    }
    await write(one, 'k', 3);
    expect(one.readSlot(slot)?.value).toBe(3);
    expect(two.readSlot(slot)?.value).toBe(2);
  });

  it('a long key is read in its stored (digest) form, as getSync reads it', async () => {
    const store = memoryStore();
    const long = `k${'x'.repeat(5000)}`;
    const slot = new MemoKey(long);
    expect(slot.stored).not.toBe(long);
    await write(store, slot.stored, 'long');
    expect(store.readSlot(slot)?.value).toBe('long');
  });
});

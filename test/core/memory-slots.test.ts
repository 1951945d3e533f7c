/**
 * The memory store's slots (readSlot): a @cached field's key, per parent, is answered again from
 * its slot while the store is unchanged, with no lookup; every change empties the slots, so no
 * change is missed and no dropped entry is kept alive; the LRU order still sees the first read
 * after each write. Counted in getSync calls and values, never timed.
 */
import { MemoKey } from '../../src/core/memo';
import { memoryStore, type MemoryStore } from '../../src/core/memory';
import { entry } from '../helpers';

const write = (store: MemoryStore, key: string, value: unknown, tags?: string[]) =>
  store.setMany([{ key, entry: { ...entry(value), tags }, ttl: Infinity }]);

describe('memory store: slots', () => {
  it('answers a slot again without a lookup while the store is unchanged, and looks up again after a change', async () => {
    const store = memoryStore();
    await write(store, 'a', 1);
    const lookups = jest.spyOn(store, 'getSync');
    const slot = new MemoKey('a');
    const first = store.readSlot(slot);
    expect(first?.value).toBe(1);
    expect(store.readSlot(slot)).toBe(first);
    expect(store.readSlot(slot)).toBe(first);
    expect(lookups).toHaveBeenCalledTimes(1);
    await write(store, 'other', 2); // any change: the slot is read again
    expect(store.readSlot(slot)).toBe(first);
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

  const changes: [string, (store: MemoryStore) => Promise<void>, unknown][] = [
    ['a write of the same key', (store) => write(store, 'a', 'new'), 'new'],
    ['a write of another key', (store) => write(store, 'b', 'b'), 'old'],
    ['a delete of the key', (store) => store.delete(['a']), undefined],
    ['a delete of another key', (store) => store.delete(['b']), 'old'],
    ['an invalidation of its tag', (store) => store.invalidateTags(['t']), undefined],
    ['an invalidation of another tag', (store) => store.invalidateTags(['u']), 'old'],
    ['a clear', (store) => store.clear(), undefined],
  ];

  it.each(changes)('after %s the slot holds nothing and reads what the store holds', async (_name, change, after) => {
    const store = memoryStore();
    await write(store, 'a', 'old', ['t']);
    await write(store, 'b', 'b');
    const slot = new MemoKey('a');
    const other = new MemoKey('b');
    expect(store.readSlot(slot)?.value).toBe('old');
    expect(store.readSlot(other)?.value).toBe('b');
    await change(store);
    // Emptied at once: an entry the store dropped is not kept alive by a slot until its next read.
    expect(slot.entry).toBeUndefined();
    expect(other.entry).toBeUndefined();
    expect(store.readSlot(slot)?.value).toBe(after);
    expect(store.getSync('a')?.value).toBe(after);
  });

  it('an eviction empties the slots: the evicted entry is not answered, nor kept', async () => {
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

  it('LRU order: the first read through a slot after a write moves its key up, so it outlives keys not read', async () => {
    const store = memoryStore({ max: 2 });
    await write(store, 'a', 'a');
    await write(store, 'b', 'b'); // b is the most recent
    const slot = new MemoKey('a');
    expect(store.readSlot(slot)?.value).toBe('a'); // a is now
    expect(store.readSlot(slot)?.value).toBe('a'); // from the slot
    await write(store, 'c', 'c'); // evicts the least recent: b
    expect(store.getSync('b')).toBeUndefined();
    expect(store.readSlot(slot)?.value).toBe('a');
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

/**
 * An invalidation's store call takes time (a round trip; a Cluster's tag bump is two: the clock's
 * master, then the tag's). A fill of what it covers that starts during the call reads the store
 * before the call lands (the value it removes, a tag's version before its bump) and must not answer
 * a caller that arrives after the invalidation returned: it is abandoned when the call ends, as the
 * fills started before it were when it began. A store the test owns (versions as Redis keeps them),
 * with its calls held and released by the test.
 */
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { deferred, flush } from '../helpers';

function heldStore() {
  const inner = memoryStore();
  const versions = new Map<string, number>();
  const gates = { reads: undefined as Promise<void> | undefined, writes: undefined as Promise<void> | undefined };
  const after = async <R>(gate: Promise<void> | undefined, call: () => R | Promise<R>): Promise<R> => {
    if (gate !== undefined) await gate;
    return call();
  };
  const store: Store = {
    name: 'held',
    // A read runs on the server at once (what it returns is what the store held then), and its
    // answer arrives when the test lets it.
    getMany: async (keys) => {
      const read = await inner.getMany(keys);
      if (gates.reads !== undefined) await gates.reads;
      return read;
    },
    setMany: (writes) => inner.setMany(writes),
    delete: (keys) => after(gates.writes, () => inner.delete(keys)),
    clear: () => after(gates.writes, () => inner.clear()),
    tagVersions: async (tags) => tags.map((tag) => versions.get(tag) ?? 0),
    invalidateTags: (tags) =>
      after(gates.writes, () => void tags.forEach((tag) => versions.set(tag, (versions.get(tag) ?? 0) + 1))),
  };
  return { store, gates };
}

const cases = [
  ['invalidateTags', { tags: ['T'] }, (cache: ReturnType<typeof createCache>) => cache.invalidateTags(['T'])],
  ['invalidate', undefined, (cache: ReturnType<typeof createCache>) => cache.invalidate('k')],
  ['clear', undefined, (cache: ReturnType<typeof createCache>) => cache.clear()],
] as const;

it.each(cases)(
  '%s: a fill that started while the store call was on its way does not answer a caller arriving after it returned',
  async (_name, options, invalidate) => {
    const { store, gates } = heldStore();
    const cache = createCache({ store, ttl: 60_000 });
    let version = 'old';
    const load = () => cache.getOrCompute('k', async () => version, options);
    expect(await load()).toBe('old');
    version = 'new'; // the database changed: the invalidation follows
    const writes = deferred<void>();
    const reads = deferred<void>();
    gates.writes = writes.promise;
    const invalidated = invalidate(cache);
    gates.reads = reads.promise;
    const during = load(); // its read of the store goes out before the invalidation lands
    await flush();
    writes.resolve(); // the invalidation lands and returns
    await invalidated;
    const later = load(); // asked after it returned
    reads.resolve();
    expect(await later).toBe('new');
    expect(['old', 'new']).toContain(await during); // asked before it returned: either
  },
);

it('prime: a load that started while the prime was on its way does not answer a caller arriving after it returned', async () => {
  const { store, gates } = heldStore();
  const cache = createCache({ store, ttl: 60_000 });
  let version = 'old';
  const users = cache.loader<string, string>({ name: 'users', batch: async (ids) => ids.map(() => version) });
  expect(await users.load('1')).toBe('old');
  version = 'new';
  const writes = deferred<void>();
  const reads = deferred<void>();
  gates.writes = writes.promise; // the prime's fence (a delete) is held
  const primed = users.prime('1', 'new');
  gates.reads = reads.promise;
  const during = users.load('1'); // reads the older value before the fence lands
  await flush();
  writes.resolve();
  await primed;
  const later = users.load('1');
  reads.resolve();
  expect(await later).toBe('new');
  expect(['old', 'new']).toContain(await during);
});

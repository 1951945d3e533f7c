/**
 * The retry of an invalidation the store did not take (./invalidation-retry): while it waits, this
 * process reads nothing it covers; once the retry lands, the loads of what it covers that are in
 * flight read the store before it landed (or while it waited) and are abandoned, as an
 * invalidation's own call sweeps them (./invalidation-window). A store the test owns: it can be
 * down, its reads run at once and answer when the test lets them, its invalidations land when the
 * test lets them. Timers are faked (the retry's delay); nothing sleeps.
 */
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { deferred, flush } from '../helpers';

beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] }));
afterEach(() => jest.useRealTimers());
const advance = async (ms: number) => (jest.advanceTimersByTime(ms), flush());

function heldStore() {
  const inner = memoryStore();
  const versions = new Map<string, number>();
  const state = {
    down: false,
    deletes: 0,
    reads: undefined as Promise<void> | undefined,
    writes: undefined as Promise<void> | undefined,
  };
  const invalidation = async <R>(call: () => R | Promise<R>): Promise<R> => {
    if (state.down) throw new Error('store down');
    if (state.writes !== undefined) await state.writes;
    return call();
  };
  const store: Store = {
    name: 'held',
    getMany: async (keys) => {
      const read = await inner.getMany(keys); // what the store held when the read ran
      if (state.reads !== undefined) await state.reads; // its answer, late
      return read;
    },
    setMany: (writes) => inner.setMany(writes),
    delete: (keys) => (state.deletes++, invalidation(() => inner.delete(keys))),
    clear: () => invalidation(() => inner.clear()),
    tagVersions: async (tags) => tags.map((tag) => versions.get(tag) ?? 0),
    invalidateTags: (tags) =>
      invalidation(() => void tags.forEach((tag) => versions.set(tag, (versions.get(tag) ?? 0) + 1))),
  };
  return { store, state };
}

type Cache = ReturnType<typeof createCache>;

describe.each([
  ['invalidate', undefined, (cache: Cache) => cache.invalidate('k')],
  ['invalidateTags', { tags: ['T'] }, (cache: Cache) => cache.invalidateTags(['T'])],
  ['clear', undefined, (cache: Cache) => cache.clear()],
] as const)('%s, not taken, then retried', (_name, options, invalidate) => {
  async function setup() {
    const { store, state } = heldStore();
    const cache = createCache({ store, ttl: 60_000 });
    const db = { version: 'old' };
    const load = () => cache.getOrCompute('k', async () => db.version, options);
    expect(await load()).toBe('old');
    db.version = 'new';
    state.down = true;
    await invalidate(cache); // returned: from now on this process never answers 'old'
    expect(cache.pendingInvalidations).not.toEqual({ keys: 0, tags: 0, clear: false });
    state.down = false;
    return { cache, state, load };
  }

  it('a load that starts while the retry is on its way, answered after it landed: the new value', async () => {
    const { cache, state, load } = await setup();
    const writes = deferred<void>();
    state.writes = writes.promise;
    await advance(250); // the retry goes out, and waits
    const reads = deferred<void>();
    state.reads = reads.promise;
    const during = load(); // reads the old value: the retry has not landed
    await flush();
    writes.resolve(); // it lands
    await flush();
    expect(cache.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
    reads.resolve(); // the old value reaches the load after that
    expect(await during).toBe('new');
    expect(await load()).toBe('new');
  });

  it('a load that read while the invalidation waited, answered after the retry landed: the new value', async () => {
    const { cache, state, load } = await setup();
    const reads = deferred<void>();
    state.reads = reads.promise;
    const during = load();
    await flush();
    await advance(250); // the retry is sent and taken
    expect(cache.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
    reads.resolve();
    expect(await during).toBe('new');
  });
});

it('the next outage is retried after the first delay even when the last ended by a later invalidation', async () => {
  const { store, state } = heldStore();
  const cache = createCache({ store, ttl: 60_000 });
  state.down = true;
  await cache.invalidate('a'); // retried at 250 ms
  await advance(250); // fails again: next after 500 ms
  await advance(500); // and again: next after 1 s
  state.down = false;
  await cache.invalidate('a'); // taken: the waiting one is retired
  expect(cache.pendingInvalidations.keys).toBe(0);
  await advance(2_000); // its retry's timer ends on nothing
  state.down = true;
  const before = state.deletes;
  await cache.invalidate('b'); // a new outage
  state.down = false;
  await advance(250);
  expect(state.deletes - before).toBe(2); // the call, and its retry after 250 ms (not 1 s)
});

it.each([
  ['clear', (cache: Cache) => cache.clear(), undefined],
  ['invalidateTags', (cache: Cache) => cache.invalidateTags(['T']), { tags: ['T'] }],
  ['invalidate', (cache: Cache) => cache.invalidate('k0'), undefined],
] as const)(
  'pending %s: the loads computing when its retry lands (they read nothing it covers) are not computed again',
  async (_name, invalidate, options) => {
    const { store, state } = heldStore();
    const cache = createCache({ store, ttl: 60_000 });
    state.down = true;
    await invalidate(cache);
    state.down = false;
    const gate = deferred<void>();
    let computed = 0;
    const loads = Array.from({ length: 20 }, (_, i) =>
      cache.getOrCompute(
        `k${i}`,
        async () => {
          computed++;
          await gate.promise; // a slow source (loaded: the cache was bypassed)
          return `fresh${i}`;
        },
        options,
      ),
    );
    await flush();
    expect(computed).toBe(20);
    await advance(250); // the retry lands while they compute
    expect(cache.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
    gate.resolve();
    expect(await Promise.all(loads)).toEqual(loads.map((_, i) => `fresh${i}`));
    expect(computed).toBe(20);
  },
);

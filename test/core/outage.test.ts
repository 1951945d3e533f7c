/**
 * While the store cannot be read or written (Redis down, its breaker open), what this process
 * filled is read from an outage memo for up to OUTAGE_HOLD_MS (never past its freshness): a key is
 * filled once a second at most per process, not once per load. Counted fills, an injected clock.
 */
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { memoryStore } from '../../src/core/memory';
import { OUTAGE_HOLD_MS, OUTAGE_MAX_ENTRIES } from '../../src/core/outage';
import type { Store } from '../../src/core/store';
import { deferred } from '../helpers';

/** A memory store (a database the test owns) whose every call fails while `down`. */
function flakyStore() {
  const inner = memoryStore();
  const state = { down: false };
  const gate =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      state.down ? Promise.reject(new Error('store down')) : call(...args);
  const store: Store = {
    name: 'flaky',
    getMany: gate((keys: readonly string[]) => inner.getMany(keys)),
    setMany: gate((writes: Parameters<Store['setMany']>[0]) => inner.setMany(writes)),
    delete: gate((keys: readonly string[]) => inner.delete(keys)),
    invalidateTags: gate((tags: readonly string[]) => inner.invalidateTags(tags)),
    clear: gate(() => inner.clear()),
  };
  return { store, inner, state };
}

function setup(ttl = 60_000) {
  const clock = manualClock();
  const { store, inner, state } = flakyStore();
  const cache = createCache({ store, ttl, clock });
  let fills = 0;
  let version = 'v1';
  const load = (key = 'k') => cache.getOrCompute(key, async () => (fills++, version));
  return {
    clock,
    cache,
    inner,
    state,
    load,
    fills: () => fills,
    setVersion: (v: string) => (version = v),
  };
}

it('while the store is down, a key is filled once per hold, not once per load; the loads still answer', async () => {
  const t = setup();
  t.state.down = true;
  for (let i = 0; i < 20; i++) expect(await t.load()).toBe('v1');
  expect(t.fills()).toBe(1);
  expect(t.cache.metrics().total.storeErrors).toBeGreaterThan(0);
  t.clock.advance(OUTAGE_HOLD_MS); // the hold is over: filled again, then held again
  t.setVersion('v2');
  for (let i = 0; i < 20; i++) expect(await t.load()).toBe('v2');
  expect(t.fills()).toBe(2);
});

it('never past the value’s own freshness (a ttl shorter than the hold)', async () => {
  const t = setup(200);
  t.state.down = true;
  await t.load();
  await t.load();
  expect(t.fills()).toBe(1);
  t.clock.advance(200);
  await t.load();
  expect(t.fills()).toBe(2);
});

it('a local invalidation or clear drops what is held: the next load fills', async () => {
  const t = setup();
  t.state.down = true;
  await t.load();
  await t.cache.invalidate('k');
  t.setVersion('v2');
  expect(await t.load()).toBe('v2');
  expect(t.fills()).toBe(2);
  await t.cache.clear();
  t.setVersion('v3');
  expect(await t.load()).toBe('v3');
  expect(t.fills()).toBe(3);
});

it('only a failed read consults it: once the store answers, its answer (another replica’s write) wins', async () => {
  const t = setup();
  t.state.down = true;
  expect(await t.load()).toBe('v1');
  t.state.down = false;
  // Another replica wrote the key meanwhile.
  const other = createCache({ store: t.inner, ttl: 60_000, clock: t.clock });
  await other.getOrCompute('k', async () => 'from the other replica');
  expect(await t.load()).toBe('from the other replica');
  // And a miss the store answers is a miss, even within the hold (the other replica invalidated it).
  await t.cache.getOrCompute('j', async () => 'mine'); // written: the store took it
  t.state.down = true;
  await t.cache.getOrCompute('m', async () => 'held'); // held: the store is down
  t.state.down = false;
  await other.invalidate('m');
  expect(await t.cache.getOrCompute('m', async () => 'refilled')).toBe('refilled');
});

it('a write the store took later forgets the held entry', async () => {
  const t = setup();
  t.state.down = true;
  await t.load();
  t.state.down = false;
  t.clock.advance(OUTAGE_HOLD_MS);
  t.setVersion('v2');
  expect(await t.load()).toBe('v2'); // filled and written (the store is back)
  t.state.down = true;
  // Down again: the entry held in the first outage (v1) was forgotten when v2's write landed; v2
  // itself was written, not held: this read fails with nothing held, so it fills.
  t.setVersion('v3');
  expect(await t.load()).toBe('v3');
});

it('is bounded', async () => {
  const t = setup();
  t.state.down = true;
  for (let i = 0; i < OUTAGE_MAX_ENTRIES + 50; i++) await t.load(`k${i}`);
  expect(t.fills()).toBe(OUTAGE_MAX_ENTRIES + 50);
  await t.load('k0'); // the oldest went first
  await t.load(`k${OUTAGE_MAX_ENTRIES + 49}`); // the newest is held
  expect(t.fills()).toBe(OUTAGE_MAX_ENTRIES + 51);
});

/**
 * A tag-versioned store (as Redis is: the registry judges an entry by its tags' versions) whose
 * every call fails while `down`; a second registry on it stands for another replica.
 */
function versionedFlakyStore() {
  const { store, inner, state } = flakyStore();
  const versions = new Map<string, number>();
  const gate = <R>(call: () => R): Promise<R> =>
    state.down ? Promise.reject(new Error('store down')) : Promise.resolve(call());
  const versioned: Store = {
    ...store,
    tagVersions: (tags) => gate(() => tags.map((tag) => versions.get(tag) ?? 0)),
    invalidateTags: (tags) => gate(() => void tags.forEach((tag) => versions.set(tag, (versions.get(tag) ?? 0) + 1))),
  };
  return { store: versioned, inner, state };
}

it('tagged values too: while the store is down (their tags’ versions unreadable) a key is filled once per hold, and a local invalidation of a tag drops it', async () => {
  const clock = manualClock();
  const { store, state } = versionedFlakyStore();
  const cache = createCache({ store, ttl: 60_000, clock });
  let fills = 0;
  let version = 'v1';
  const load = () => cache.getOrCompute('k', async () => (fills++, version), { tags: ['T'] });
  expect(await load()).toBe('v1'); // written, with T's version
  state.down = true;
  clock.advance(60_000); // expired: the next load fills, while the store is down
  version = 'v2';
  for (let i = 0; i < 20; i++) expect(await load()).toBe('v2');
  expect(fills).toBe(2);
  await cache.invalidateTags(['T']); // the store refuses it: unsent, and what is held of T is dropped
  version = 'v3';
  for (let i = 0; i < 20; i++) expect(await load()).toBe('v3'); // filled after the invalidation: held, not covered
  expect(fills).toBe(3);
  clock.advance(OUTAGE_HOLD_MS);
  expect(await load()).toBe('v3');
  expect(fills).toBe(4);
});

it('an entry the store holds whose tags’ versions cannot be read (their node down) is answered by the memo, never by that entry', async () => {
  const clock = manualClock();
  const { store, state } = versionedFlakyStore();
  const tagVersions = store.tagVersions!;
  const tagsDown = { on: false };
  store.tagVersions = (tags) => (tagsDown.on ? Promise.reject(new Error('tag node down')) : tagVersions(tags));
  const cache = createCache({ store, ttl: 60_000, clock });
  let fills = 0;
  let version = 'v1';
  const load = () => cache.getOrCompute('k', async () => (fills++, version), { tags: ['T'] });
  expect(await load()).toBe('v1');
  tagsDown.on = true; // the entry is still read, its tags' versions are not: it cannot be judged
  version = 'v2';
  for (let i = 0; i < 10; i++) expect(await load()).toBe('v2'); // one fill, then held
  expect(fills).toBe(2);
  expect(state.down).toBe(false);
});

describe('what the memo holds answers a tagged load only under the same tags', () => {
  const down = () => {
    const clock = manualClock();
    const { store, state } = versionedFlakyStore();
    state.down = true;
    return { cache: createCache({ store, ttl: 60_000, clock }) };
  };

  it('held under tag A, loaded naming B after B was invalidated here: filled, not the held value', async () => {
    const { cache } = down();
    let version = 'old';
    expect(await cache.getOrCompute('k', async () => version, { tags: ['A'] })).toBe('old'); // held under [A]
    version = 'new';
    await cache.invalidateTags(['B']); // unsent; drops what is held under B (nothing)
    expect(await cache.getOrCompute('k', async () => version, { tags: ['B'] })).toBe('new');
  });

  it('held untagged (a failed write), loaded naming B after B was invalidated here: filled', async () => {
    const { cache } = down();
    let version = 'old';
    expect(await cache.getOrCompute('k', async () => version)).toBe('old');
    await new Promise((resolve) => setImmediate(resolve)); // the write's failure is known: held
    version = 'new';
    await cache.invalidateTags(['B']);
    expect(await cache.getOrCompute('k', async () => version, { tags: ['B'] })).toBe('new');
  });

  it('a value a joiner named other tags for (served, not written) is not held either', async () => {
    const { cache } = down();
    let version = 'old';
    const gate = deferred<void>();
    const first = cache.getOrCompute(
      'k',
      async () => {
        const read = version;
        await gate.promise;
        return read;
      },
      { tags: ['A'] },
    );
    await new Promise((resolve) => setImmediate(resolve));
    version = 'new';
    await cache.invalidateTags(['B']); // not the fill's tag: it goes on
    const joiner = cache.getOrCompute('k', async () => version, { tags: ['B'] }); // joins, naming B
    gate.resolve();
    expect([await first, await joiner]).toEqual(['old', 'old']); // the joiner's answer: served, not written
    expect(await cache.getOrCompute('k', async () => version, { tags: ['B'] })).toBe('new');
  });
});

it('one failed store call counts once, whatever sources its keys came from (the sources sum to the calls)', async () => {
  const { store, state } = flakyStore();
  const cache = createCache({ store, ttl: 60_000 });
  const failed: string[] = [];
  cache.observe({ onStoreError: (_error, operation) => failed.push(operation) });
  const users = cache.loader<string, string>({ name: 'user', batch: async (keys) => keys.map((k) => `u${k}`) });
  const posts = cache.loader<string, string>({ name: 'post', batch: async (keys) => keys.map((k) => `p${k}`) });
  state.down = true;
  // One tick: the keys of three sources read in one store call, which fails.
  await Promise.all([
    users.load('1'),
    users.load('2'),
    posts.load('1'),
    cache.getOrCompute('a', async () => 'a'),
    cache.getOrCompute('b', async () => 'b', { label: 'L' }),
  ]);
  const reads = failed.filter((operation) => operation.startsWith('getMany')).length;
  expect(reads).toBe(1);
  const { total, sources } = cache.metrics();
  const bySource = Object.values(sources).reduce((sum, counters) => sum + counters.storeErrors, 0);
  expect(total.storeErrors).toBe(failed.length); // each failed call once (the writes too)
  expect(bySource).toBe(total.storeErrors);
  await cache.close();
});

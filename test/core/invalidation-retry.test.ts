/**
 * An invalidation the store fails to take (Redis stalled, its breaker open) is kept and sent again
 * until the store takes it: otherwise the value it made stale stays for its whole ttl on every
 * replica. Driven by jest's fake timers (the retry's delays), counted on the store's calls and on
 * what a second replica reads. The real-Redis version: test/redis/invalidation-retry.test.ts.
 */
import { createCache } from '../../src/core/cache';
import { MAX_PENDING_INVALIDATIONS } from '../../src/core/invalidation';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { StoreCalls } from '../../src/core/store-calls';
import { StorePartialError } from '../../src/core/errors';
import { Observers } from '../../src/core/hooks';
import type { Counters } from '../../src/core/types';
import { flush } from '../helpers';

/** A memory store (a database the test owns) whose invalidations fail while `down`. */
function flakyStore() {
  const inner = memoryStore();
  const state = { down: false, deletes: 0, tagCalls: 0, clears: 0 };
  const failing = () => Promise.reject(new Error('store down'));
  const store: Store = {
    name: 'flaky',
    getSync: inner.getSync.bind(inner),
    getMany: inner.getMany.bind(inner),
    setMany: inner.setMany.bind(inner),
    delete(keys) {
      state.deletes++;
      return state.down ? failing() : inner.delete(keys);
    },
    invalidateTags(tags) {
      state.tagCalls++;
      return state.down ? failing() : inner.invalidateTags(tags);
    },
    clear() {
      state.clears++;
      return state.down ? failing() : inner.clear();
    },
  };
  return { store, inner, state };
}

beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] }));
afterEach(() => jest.useRealTimers());

async function advance(ms: number): Promise<void> {
  jest.advanceTimersByTime(ms);
  await flush();
}

it('a failed invalidate and invalidateTags are sent again until the store takes them; another replica then misses', async () => {
  const { store, inner, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  const reader = createCache({ store: inner, ttl: 60_000 }); // another replica, on the same data
  let version = 'old';
  const fills = { k: 0, tagged: 0 };
  const k = () => reader.getOrCompute('k', () => (fills.k++, version));
  const tagged = () => reader.getOrCompute('tagged', () => (fills.tagged++, version), { tags: ['User:1'] });
  expect([await k(), await tagged()]).toEqual(['old', 'old']);

  state.down = true;
  version = 'new';
  await writer.invalidate('k');
  await writer.invalidateTags(['User:1']);
  expect(writer.metrics().total.storeErrors).toBe(2);
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 1, clear: false });
  expect([await k(), await tagged()]).toEqual(['old', 'old']); // stale on the other replica meanwhile

  await advance(250); // first retry: still down, kept, the delay doubles
  expect([state.deletes, state.tagCalls]).toEqual([2, 2]);
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 1, clear: false });
  await advance(250);
  expect([state.deletes, state.tagCalls]).toEqual([2, 2]); // not before 500 ms
  state.down = false;
  await advance(250);
  expect([state.deletes, state.tagCalls]).toEqual([3, 3]);
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });

  expect([await k(), await tagged()]).toEqual(['new', 'new']);
  expect(fills).toEqual({ k: 2, tagged: 2 });
  await advance(60_000); // nothing left to send
  expect([state.deletes, state.tagCalls]).toEqual([3, 3]);
});

it('while an invalidation is unsent, this replica reads nothing it covers: its own read after the write never finds the older value', async () => {
  const { store, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  let version = 'old';
  const fills = { k: 0, tagged: 0, other: 0 };
  const k = () => writer.getOrCompute('k', () => (fills.k++, version));
  const tagged = () => writer.getOrCompute('tagged', () => (fills.tagged++, version), { tags: ['User:1'] });
  const other = () => writer.getOrCompute('other', () => (fills.other++, version), { tags: ['User:2'] });
  expect([await k(), await tagged(), await other()]).toEqual(['old', 'old', 'old']);

  state.down = true;
  version = 'new';
  await writer.invalidate('k');
  await writer.invalidateTags(['User:1']);
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 1, clear: false });
  // The store answers again before the retry: the older values are still in it, not read here.
  state.down = false;
  expect([await k(), await tagged(), await other()]).toEqual(['new', 'new', 'old']);
  expect(fills).toEqual({ k: 2, tagged: 2, other: 1 });
  await advance(250); // the retry is taken: the store's own entries answer again
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  expect([await k(), await tagged()]).toEqual(['new', 'new']);
  expect(fills).toEqual({ k: 3, tagged: 3, other: 1 }); // the retry removed what was filled before it

  // A clear the store failed to take: nothing is read until it is sent.
  state.down = true;
  version = 'newest';
  await writer.clear();
  state.down = false;
  expect(await other()).toBe('newest');
});

it('a store that answers again gets the retry at once, not at the end of its backoff (never sooner than 250 ms after the last)', async () => {
  const { store, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  state.down = true;
  await writer.invalidateTags(['User:1']); // t = 0: failed, retry at 250
  await advance(250); // t = 250: the retry fails, the next at 750
  expect(state.tagCalls).toBe(2);
  state.down = false;
  await writer.getOrCompute('x', () => 'x'); // a store call succeeds (its write): the retry comes forward
  await advance(249);
  expect(state.tagCalls).toBe(2); // not sooner than 250 ms after the last
  await advance(1); // t = 500, not 750
  expect(state.tagCalls).toBe(3);
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
});

it('past the bound, a clear is kept in place of the dropped invalidations: nothing is read here until the store takes it, and it is sent', async () => {
  const { store, inner, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  let fills = 0;
  const load = () => writer.getOrCompute('k', () => (fills++, 'v'), { tags: ['T:first'] });
  await load();
  state.down = true;
  await writer.invalidateTags(['T:first']); // the oldest: dropped by the bound below
  await writer.invalidateTags(Array.from({ length: MAX_PENDING_INVALIDATIONS }, (_, i) => `T:${i}`));
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: MAX_PENDING_INVALIDATIONS, clear: true });
  state.down = false;
  await load(); // the store still holds k (T:first never reached it): not read here
  expect(fills).toBe(2);
  await advance(250);
  expect(state.clears).toBe(1); // the clear sent in its place: k is gone from the store too
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  expect(await inner.getMany(['k'])).toEqual([undefined]);
});

it('a retry the store took in part (a half-open breaker lets one call through) goes again after the first delay, not a doubled one', async () => {
  const { store, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  state.down = true;
  await writer.invalidate('k');
  await writer.invalidateTags(['T']);
  const bump = store.invalidateTags!.bind(store);
  let refuseTags = true;
  store.invalidateTags = (tags) => (refuseTags ? Promise.reject(new Error('breaker open')) : bump(tags));
  state.down = false;
  await advance(250); // the delete is taken, the tag bump refused
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 1, clear: false });
  refuseTags = false;
  await advance(250); // 250 ms later, not 500
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
});

it('an invalidation the store takes retires the older ones it covers (same key, same tag; a clear, all): nothing left to retry or to keep unread', async () => {
  const { store, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  state.down = true;
  await writer.invalidate('k');
  await writer.invalidateTags(['T', 'U']);
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 2, clear: false });
  state.down = false;
  await writer.invalidateTags(['T']); // taken: T's older one needs no retry
  await writer.invalidate('k');
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 1, clear: false });
  let fills = 0;
  await writer.getOrCompute('t', () => (fills++, 'v'), { tags: ['T'] });
  await writer.getOrCompute('t', () => (fills++, 'v'), { tags: ['T'] });
  expect(fills).toBe(1); // read again: nothing unsent covers it
  state.down = true;
  await writer.clear();
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 1, clear: true });
  state.down = false;
  await writer.clear(); // taken: everything older is covered
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  const tagCalls = state.tagCalls;
  await advance(10_000);
  expect(state.tagCalls).toBe(tagCalls); // nothing was left to send
});

it('a failed invalidation issued after one still in flight is kept when that earlier one is taken', async () => {
  const { store } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  const bump = store.invalidateTags!.bind(store);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let first = true;
  store.invalidateTags = async (tags) => {
    if (first) {
      first = false;
      await held; // the first call is slow…
      return bump(tags);
    }
    return Promise.reject(new Error('store down')); // …the second fails meanwhile
  };
  const slow = writer.invalidateTags(['T']);
  await writer.invalidateTags(['T']); // issued after the slow one: failed, kept
  expect(writer.pendingInvalidations.tags).toBe(1);
  release();
  await slow; // taken, but issued before the failed one: does not retire it
  expect(writer.pendingInvalidations.tags).toBe(1);
});

it('one retry at a time: what fails while a retry is sending waits for it, and counts as pending throughout', async () => {
  const { store, state } = flakyStore();
  let hold: Promise<void> | undefined;
  let release!: () => void;
  const inner = store.delete.bind(store);
  store.delete = async (keys, options) => {
    if (hold !== undefined) await hold;
    return inner(keys, options);
  };
  const writer = createCache({ store, ttl: 60_000 });
  state.down = true;
  await writer.invalidate('k');
  hold = new Promise<void>((resolve) => (release = resolve));
  state.down = false;
  await advance(250); // the retry's delete is sent, and held
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 0, clear: false });
  state.down = true;
  await writer.invalidateTags(['T']); // fails while the retry sends
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 1, clear: false });
  await advance(10_000);
  expect(state.tagCalls).toBe(1); // no second retry while one is sending
  state.down = false;
  release();
  hold = undefined;
  await flush();
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 1, clear: false }); // the key landed
  await advance(250);
  expect(state.tagCalls).toBe(2);
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
});

it('a failed clear is sent again; a delay that reached its cap returns to the first once the store answers', async () => {
  const { store, inner, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  await writer.getOrCompute('k', () => 'old');
  state.down = true;
  await writer.clear();
  for (let i = 0; i < 40; i++) await advance(250); // retries at 250, 750, 1,750, … ms: every 1 s once capped
  expect(state.clears).toBeGreaterThanOrEqual(10); // 1 + 10 in 10 s (a 5 s cap: 1 + 5)
  expect(writer.pendingInvalidations.clear).toBe(true);
  state.down = false;
  await advance(5_000);
  expect(writer.pendingInvalidations.clear).toBe(false);
  expect(await inner.getMany(['k'])).toEqual([undefined]);
  // The next failure is retried after the first delay again.
  state.down = true;
  await writer.invalidate('x');
  const before = state.deletes;
  state.down = false;
  await advance(250);
  expect(state.deletes).toBe(before + 1);
});

it('pending invalidations are bounded (the oldest dropped) and dropped when the cache closes', async () => {
  const { store, state } = flakyStore();
  const writer = createCache({ store, ttl: 60_000 });
  state.down = true;
  const keys = Array.from({ length: MAX_PENDING_INVALIDATIONS + 5 }, (_, i) => `k${i}`);
  await writer.invalidate(keys);
  expect(writer.pendingInvalidations.keys).toBe(MAX_PENDING_INVALIDATIONS);
  await writer.close();
  expect(writer.pendingInvalidations.keys).toBe(0);
  const calls = state.deletes;
  await advance(60_000);
  expect(state.deletes).toBe(calls); // no retry after close
});

it('a store method that returns no promise counts as done (not retried forever)', async () => {
  const inner = memoryStore();
  let deletes = 0;
  const store: Store = {
    name: 'sync-delete',
    getMany: inner.getMany.bind(inner),
    setMany: inner.setMany.bind(inner),
    clear: inner.clear.bind(inner),
    delete: ((keys: readonly string[]) => {
      deletes++;
      void inner.delete(keys);
    }) as unknown as Store['delete'],
  };
  const cache = createCache({ store });
  await cache.invalidate('k');
  await advance(10_000);
  expect(deletes).toBe(1);
  expect(cache.pendingInvalidations.keys).toBe(0);
});

it('a prime the store failed to take is sent again as an invalidation: the older value does not stay on another replica', async () => {
  const { store, inner, state } = flakyStore();
  const writes = { count: 0 };
  const setMany = store.setMany;
  store.setMany = (entries) => (
    writes.count++,
    state.down ? Promise.reject(new Error('store down')) : setMany(entries)
  );
  const writer = createCache({ store, ttl: 60_000 });
  const reader = createCache({ store: inner, ttl: 60_000 });
  let version = 'old';
  let fills = 0;
  const batch = async (keys: readonly string[]) => keys.map(() => (fills++, version));
  const writerUsers = writer.loader<string, string>({ name: 'users', batch });
  const readerUsers = reader.loader<string, string>({ name: 'users', batch });
  expect(await readerUsers.load('1')).toBe('old');

  // The fence fails: no write is tried on a store that refused it, and the key waits for a retry.
  state.down = true;
  version = 'new';
  await writerUsers.prime('1', 'new');
  expect([state.deletes, writes.count]).toEqual([1, 0]);
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 0, clear: false });
  expect(await readerUsers.load('1')).toBe('old'); // meanwhile

  state.down = false;
  await advance(250);
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  expect(await readerUsers.load('1')).toBe('new'); // refilled: the older value is gone
  expect(fills).toBe(2);

  // The write fails after the fence took: the same.
  await writerUsers.prime('1', 'newer');
  expect(await readerUsers.load('1')).toBe('newer');
  store.setMany = () => Promise.reject(new Error('write failed'));
  version = 'newest';
  await writerUsers.prime('1', 'newest');
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 0, clear: false });
  await advance(250);
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  expect(await readerUsers.load('1')).toBe('newest');
});

it('a prime with tags whose tag versions the store failed to read: the key is invalidated all the same, and retried', async () => {
  const { store, inner, state } = flakyStore();
  // A tag-versioned store (as Redis is): versions read before a prime's write.
  store.tagVersions = (tags) =>
    state.down ? Promise.reject(new Error('store down')) : Promise.resolve(tags.map(() => 0));
  const writer = createCache({ store, ttl: 60_000 });
  const reader = createCache({ store: inner, ttl: 60_000 });
  let version = 'old';
  const batch = async (keys: readonly string[]) => keys.map(() => version);
  const tags = (key: string) => [`User:${key}`];
  const writerUsers = writer.loader<string, string>({ name: 'users', batch, tags });
  const readerUsers = reader.loader<string, string>({ name: 'users', batch, tags });
  expect(await readerUsers.load('1')).toBe('old');

  state.down = true;
  version = 'new';
  await writerUsers.prime('1', 'new');
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 0, clear: false });
  state.down = false;
  await advance(250);
  expect(writer.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  expect(await readerUsers.load('1')).toBe('new');
});

it('a throw from the retry scheduling never turns a store call that succeeded into a failure', async () => {
  const counters = { storeErrors: 0 } as Counters;
  const calls = new StoreCalls(counters, new Observers(undefined));
  calls.unsent.add(['k'], 0, [], false, 10);
  calls.succeeded = () => {
    throw new Error('a bug in the retry scheduling');
  };
  expect(await calls.call('getMany', async () => ['value'])).toEqual(['value']);
  expect(counters.storeErrors).toBe(0);
});

it('a partly taken invalidateTags (a Cluster master down: its tags failed) sends only the failed tags again', async () => {
  const inner = memoryStore();
  const down = new Set<string>(['T:down']); // the tags of the master that is down
  const bumps: string[][] = [];
  const store: Store = {
    name: 'partial',
    getSync: inner.getSync.bind(inner),
    getMany: inner.getMany.bind(inner),
    setMany: inner.setMany.bind(inner),
    delete: inner.delete.bind(inner),
    clear: inner.clear.bind(inner),
    async invalidateTags(tags) {
      bumps.push([...tags]);
      const failedAt = tags.flatMap((tag, i) => (down.has(tag) ? [i] : []));
      const taken = tags.filter((tag) => !down.has(tag));
      if (taken.length > 0) await inner.invalidateTags(taken);
      if (failedAt.length > 0)
        throw new StorePartialError(new Error('master down'), undefined, 'part of invalidateTags failed', failedAt);
    },
  };
  const cache = createCache({ store, ttl: 60_000 });
  let fills = 0;
  const healthy = () => cache.getOrCompute('h', () => (fills++, 'v'), { tags: ['T:up'] });
  await healthy();
  await cache.invalidateTags(['T:up', 'T:down']);
  expect(cache.pendingInvalidations).toEqual({ keys: 0, tags: 1, clear: false }); // T:down only
  await healthy(); // T:up's bump landed: one fill
  for (let i = 0; i < 4; i++) {
    await advance(1_000); // retries: T:down alone, never T:up again
    await healthy();
  }
  expect(bumps.slice(1).every((tags) => tags.length === 1 && tags[0] === 'T:down')).toBe(true);
  expect(bumps.length).toBeGreaterThan(2);
  expect(fills).toBe(2); // before: every retry bumped T:up again, a fill after each
  down.clear();
  await advance(1_000);
  expect(cache.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  await cache.close();
});

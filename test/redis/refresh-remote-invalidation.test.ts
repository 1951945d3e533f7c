/**
 * Callers during a background refresh on Redis, after another replica's invalidation. They were
 * answered with the entry the refresh replaces, read before the refresh started: an invalidation
 * on another replica reaches no flight here, so after it returned this replica kept serving the
 * value cached before it for as long as its refresh ran (a reviewer: v=0 for 300+ ms, seconds
 * with a slow database). Now a caller reads the store first (LoadPath's probe): another replica's
 * new value, or, when the store holds nothing usable, the refresh's own result (a fill running
 * in its own process: docs/redis.md). Two caches on one Redis prefix, one manual clock; counted.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { memoryStore } from '../../src/core/memory';
import { redisStore } from '../../src/redis/redis-store';
import { asyncStore, flush } from '../helpers';
import { connect, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  client.disconnect();
});

const caches: Cache[] = [];
afterEach(async () => {
  await Promise.all(caches.splice(0).map((cache) => cache.close()));
});

/** Replica B's fill: v1 at once, then held at a gate (its refresh), counting calls. */
function gatedFill(first?: () => void) {
  let calls = 0;
  let release: (() => void) | undefined;
  const fill = async () => {
    calls++;
    if (calls === 1) {
      first?.();
      return 'v1';
    }
    await new Promise<void>((resolve) => (release = resolve));
    return `v${calls}`;
  };
  return { fill, calls: () => calls, release: () => release?.() };
}

async function replicasWithRefreshRunning(options: { tags?: string[]; earlyRefresh?: boolean } = {}) {
  const prefix = randomPrefix('refresh-remote');
  const clock = manualClock(1_000_000);
  const swr = options.earlyRefresh === true ? {} : { swr: 60_000 };
  const a = createCache({ store: redisStore({ client, prefix }), ttl: 1_000, ...swr, clock });
  const b = createCache({ store: redisStore({ client, prefix }), ttl: 1_000, ...swr, clock });
  caches.push(a, b);
  // earlyRefresh draws from how long the fill took: the first one takes 100 ms of the clock.
  const gate = gatedFill(() => clock.advance(100));
  const call = { ...(options.tags === undefined ? {} : { tags: options.tags }) };
  // earlyRefresh: a beta so large that a fresh read a moment after the fill always refreshes.
  const bCall = options.earlyRefresh === true ? { ...call, earlyRefresh: 1e6 } : call;
  const bRead = () => b.getOrCompute('k', gate.fill, bCall);
  expect(await bRead()).toBe('v1');
  clock.advance(options.earlyRefresh === true ? 10 : 2_000); // due for early refresh / stale within grace
  expect(await bRead()).toBe('v1'); // served; B's refresh starts
  for (let i = 0; i < 200 && gate.calls() < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(gate.calls()).toBe(2); // B's refresh is running, held at the gate
  return { a, b, gate, bRead, call };
}

it.each([['swr'], ['earlyRefresh']])(
  "%s: after A invalidates and refills the key, B answers A's value, not the one its refresh replaces",
  async (mode) => {
    const { a, gate, bRead, call } = await replicasWithRefreshRunning({ earlyRefresh: mode === 'earlyRefresh' });
    await a.invalidate('k');
    expect(await a.getOrCompute('k', async () => 'from A', call)).toBe('from A');
    expect(await bRead()).toBe('from A');
    expect(gate.calls()).toBe(2);
    gate.release();
  },
);

it("after A's invalidateTags, B's callers wait for B's refresh (its own fill), never the value before", async () => {
  const { a, b, gate, bRead } = await replicasWithRefreshRunning({ tags: ['User:1'] });
  await a.invalidateTags(['User:1']);
  const before = b.metrics().total;
  let answer: string | undefined;
  const read = bRead().then((v) => (answer = v));
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(answer).toBeUndefined(); // not the replaced value: it waits for the refresh
  gate.release();
  await read;
  expect(answer).toBe('v2');
  const after = b.metrics().total;
  expect(after.staleServed - before.staleServed).toBe(0);
  expect(gate.calls()).toBe(2); // joined the refresh: no fill of its own
});

it('callers of one tick share one probe read; without an invalidation they get the stale value, not the refresh', async () => {
  const { b, gate, bRead } = await replicasWithRefreshRunning();
  const before = b.metrics().total;
  const answers = await Promise.all(Array.from({ length: 20 }, () => bRead()));
  expect(answers).toEqual(Array(20).fill('v1'));
  const after = b.metrics().total;
  expect(after.staleServed - before.staleServed).toBe(20);
  expect(gate.calls()).toBe(2);
  gate.release();
});

it('a probe whose read fails answers the value the refresh replaces (the cache never fails a load)', async () => {
  const inner = memoryStore();
  const store = asyncStore(inner);
  let failReads = false;
  const getMany = store.store.getMany.bind(store.store);
  store.store.getMany = (keys) => (failReads ? Promise.reject(new Error('store down')) : getMany(keys));
  const clock = manualClock(1_000_000);
  const cache = createCache({ store: store.store, ttl: 1_000, swr: 60_000, clock });
  caches.push(cache);
  const gate = gatedFill();
  expect(await cache.getOrCompute('k', gate.fill)).toBe('v1');
  clock.advance(2_000);
  expect(await cache.getOrCompute('k', gate.fill)).toBe('v1');
  for (let i = 0; i < 50 && gate.calls() < 2; i++) await flush();
  expect(gate.calls()).toBe(2);
  failReads = true;
  expect(await cache.getOrCompute('k', gate.fill)).toBe('v1');
  expect(cache.metrics().total.storeErrors).toBeGreaterThan(0);
  gate.release();
});

it('a coalesce-only call (ttl 0) during a refresh joins the refresh: no fill of its own, no stored value', async () => {
  const { b, gate } = await replicasWithRefreshRunning();
  let own = 0;
  const joined = b.getOrCompute('k', async () => (own++, 'own fill'), { ttl: 0 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(own).toBe(0);
  gate.release();
  expect(await joined).toBe('v2'); // the refresh's value
  expect(own).toBe(0);
});

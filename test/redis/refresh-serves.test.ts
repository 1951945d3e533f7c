/**
 * Stale-while-revalidate on an async store (Redis): while the one background refresh of a stale
 * key runs, callers get the value it replaces at once (counted staleServed), instead of joining
 * the refresh and waiting for the database. The memory store answers them from its synchronous
 * read; both stores must behave alike. Early refresh: the same, with the still-fresh value.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  client.disconnect();
});

const stores: [string, () => Store][] = [
  ['memory', () => memoryStore()],
  ['redis', () => redisStore({ client, prefix: randomPrefix('refresh-serves') })],
];

/** A fill whose calls stay pending until released, counting them. */
function gatedFill() {
  let calls = 0;
  let release: (() => void) | undefined;
  const fill = async () => {
    calls++;
    if (calls === 1) return 'v1';
    await new Promise<void>((resolve) => (release = resolve));
    return `v${calls}`;
  };
  return { fill, calls: () => calls, release: () => release?.() };
}

describe.each(stores)('callers during a background refresh (%s)', (_name, makeStore) => {
  let cache: Cache;
  afterEach(async () => {
    await cache.close();
  });

  it('a stale key: callers arriving while the refresh runs are served the stale value at once', async () => {
    const clock = manualClock(1_000_000);
    cache = createCache({ store: makeStore(), ttl: 1_000, swr: 60_000, clock });
    const gate = gatedFill();
    expect(await cache.getOrCompute('k', gate.fill)).toBe('v1');
    clock.advance(2_000); // stale, within grace
    expect(await cache.getOrCompute('k', gate.fill)).toBe('v1'); // served stale; the refresh starts
    // The refresh reads the store and takes the lock first (round trips on Redis): wait for its fill.
    for (let i = 0; i < 200 && gate.calls() < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(gate.calls()).toBe(2); // the refresh is running, held at the gate
    const before = cache.metrics().total;
    let answered = 0;
    const during = Array.from({ length: 20 }, () => cache.getOrCompute('k', gate.fill).then((v) => (answered++, v)));
    void Promise.allSettled(during); // if they did wait, close() rejects them: a failed expectation, not a crash
    // Not one of them waits for the refresh: all answered before it is released (on Redis after
    // one read: the store is asked first, see refresh-remote-invalidation.test.ts).
    for (let i = 0; i < 400 && answered < 20; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(answered).toBe(20);
    expect(await Promise.all(during)).toEqual(Array(20).fill('v1'));
    const after = cache.metrics().total;
    expect(after.staleServed - before.staleServed).toBe(20);
    expect(after.coalesced - before.coalesced).toBe(0);
    expect(gate.calls()).toBe(2);
    gate.release();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await cache.getOrCompute('k', gate.fill)).toBe('v2');
  });
});

/**
 * A caller joining a flight is counted by what the flight did: a flight that found the value in
 * the store is a hit for everyone on it (stale: served stale), only one that ran a fill makes its
 * joiners "coalesced". Memory and Redis count the same scenario the same way; per-request stats
 * and hooks follow the registry's counters.
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

type Counts = { hits: number; misses: number; coalesced: number; staleServed: number; fills: number };
const pick = (c: Counts) => ({
  hits: c.hits,
  misses: c.misses,
  coalesced: c.coalesced,
  staleServed: c.staleServed,
  fills: c.fills,
});

function diff(after: Counts, before: Counts): Counts {
  return {
    hits: after.hits - before.hits,
    misses: after.misses - before.misses,
    coalesced: after.coalesced - before.coalesced,
    staleServed: after.staleServed - before.staleServed,
    fills: after.fills - before.fills,
  };
}

const stores: [string, () => Store][] = [
  ['memory', () => memoryStore()],
  ['redis', () => redisStore({ client, prefix: randomPrefix('join-counts') })],
];

describe.each(stores)("joiners counted by their flight's outcome (%s)", (_name, makeStore) => {
  let cache: Cache;
  afterEach(async () => {
    await cache.close();
  });

  it('50 concurrent loads of a warm key are 50 hits, hooks and request stats alike', async () => {
    const heard = { hit: 0, coalesced: 0 };
    cache = createCache({
      store: makeStore(),
      ttl: 60_000,
      hooks: { onHit: () => void heard.hit++, onCoalesced: () => void heard.coalesced++ },
    });
    await cache.getOrCompute('warm', () => 'v');
    const before = pick(cache.metrics().total);
    const heardBefore = { ...heard };
    const requests = Array.from({ length: 50 }, () => cache.request());
    const values = await Promise.all(requests.map((request) => request.getOrCompute('warm', () => 'computed')));
    expect(values).toEqual(Array(50).fill('v'));
    expect(diff(pick(cache.metrics().total), before)).toEqual({
      hits: 50,
      misses: 0,
      coalesced: 0,
      staleServed: 0,
      fills: 0,
    });
    expect({ hit: heard.hit - heardBefore.hit, coalesced: heard.coalesced - heardBefore.coalesced }).toEqual({
      hit: 50,
      coalesced: 0,
    });
    for (const request of requests) expect(request.stats().total).toMatchObject({ hits: 1, coalesced: 0, misses: 0 });
  });

  it('a loader through 20 scopes on a warm key: 20 hits', async () => {
    cache = createCache({ store: makeStore(), ttl: 60_000 });
    const users = cache.loader<string, string>({ name: 'user', batch: (keys) => keys.map((key) => `u:${key}`) });
    await users.load('1');
    const before = pick(cache.metrics().total);
    const requests = Array.from({ length: 20 }, () => cache.request());
    await Promise.all(requests.map((request) => request.load(users, '1')));
    expect(diff(pick(cache.metrics().total), before)).toEqual({
      hits: 20,
      misses: 0,
      coalesced: 0,
      staleServed: 0,
      fills: 0,
    });
    for (const request of requests) expect(request.stats().total).toMatchObject({ hits: 1, coalesced: 0 });
  });

  it('a burst on a stale key (swr) is served stale 50 times', async () => {
    const clock = manualClock(Date.now());
    cache = createCache({ store: makeStore(), ttl: 60_000, swr: 600_000, clock });
    await cache.getOrCompute('s', () => 'old');
    clock.advance(61_000);
    const before = pick(cache.metrics().total);
    let fills = 0;
    const values = await Promise.all(Array.from({ length: 50 }, () => cache.getOrCompute('s', () => `new${++fills}`)));
    expect(values).toEqual(Array(50).fill('old'));
    const delta = diff(pick(cache.metrics().total), before);
    expect({ ...delta, fills: 0 }).toEqual({ hits: 0, misses: 0, coalesced: 0, staleServed: 50, fills: 0 });
  });

  it('callers joining a flight that fills are coalesced: 1 miss, 49 coalesced', async () => {
    cache = createCache({ store: makeStore(), ttl: 60_000 });
    const before = pick(cache.metrics().total);
    const requests = Array.from({ length: 50 }, () => cache.request());
    await Promise.all(requests.map((request) => request.getOrCompute('cold', () => 'v')));
    expect(diff(pick(cache.metrics().total), before)).toEqual({
      hits: 0,
      misses: 1,
      coalesced: 49,
      staleServed: 0,
      fills: 1,
    });
    expect(requests.map((request) => request.stats().total.coalesced).reduce((a, b) => a + b)).toBe(49);
  });
});

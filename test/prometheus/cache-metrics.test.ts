/**
 * herdcacheMetrics(): every counter of cache.metrics() by source, the in-flight gauge, the
 * breaker's state and the tiered store's stats, read from snapshots at scrape time; bounded labels.
 */
import Redis from 'ioredis';
import { Registry } from 'prom-client';
import { createCache, memoryStore, type Store } from '../../src/core';
import { COUNTER_NAMES } from '../../src/core/metrics';
import { redisStore } from '../../src/redis';
import {
  BREAKER_METRIC,
  CACHE_COUNTER_METRICS,
  IN_FLIGHT_METRIC,
  PENDING_INVALIDATIONS_METRIC,
  LOCK_WAITS_METRIC,
  NODE_BREAKER_METRIC,
  herdcacheMetrics,
} from '../../src/prometheus';
import { deferred } from '../helpers';
import { connect, eventually, randomPrefix } from '../redis/helpers';
import { replica } from '../redis/tiered/helpers';

/** `name{labels} value` lines of a scrape, as a map. */
async function scrape(registry: Registry): Promise<Map<string, number>> {
  const samples = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

describe('herdcacheMetrics', () => {
  it('a name already taken on the registry: refused, and nothing of its own left registered (all or nothing)', async () => {
    const { Gauge } = await import('prom-client');
    const registry = new Registry();
    new Gauge({ name: 'herdcache_fills_in_flight', help: 'mine', registers: [registry] });
    const cache = createCache();
    await expect(herdcacheMetrics({ cache, registry })).rejects.toMatchObject({
      code: 'E_INVALID_OPTION',
      message: expect.stringContaining('"herdcache_fills_in_flight"'),
    });
    expect(registry.getMetricsAsArray().map((metric) => metric.name)).toEqual(['herdcache_fills_in_flight']);
    registry.removeSingleMetric('herdcache_fills_in_flight');
    const collectors = await herdcacheMetrics({ cache, registry }); // a retry on the freed registry
    expect(collectors.names.length).toBeGreaterThan(5);
    collectors.close();
  });

  it('exposes every counter of cache.metrics() by source, equal to the snapshot at scrape time', async () => {
    let failReads = false;
    const memory = memoryStore();
    // A store that can fail its reads: storeErrors, counted under the loads' sources.
    const store = {
      name: 'flaky',
      getMany: (keys: readonly string[]) => (failReads ? Promise.reject(new Error('down')) : memory.getMany(keys)),
      setMany: memory.setMany.bind(memory),
      delete: memory.delete.bind(memory),
      clear: memory.clear.bind(memory),
    };
    const cache = createCache({ store, ttl: 60_000 });
    const registry = new Registry();
    const collectors = await herdcacheMetrics({ cache, registry });
    expect(collectors.names).toEqual([
      ...COUNTER_NAMES.map((name) => CACHE_COUNTER_METRICS[name][0]),
      IN_FLIGHT_METRIC,
      PENDING_INVALIDATIONS_METRIC,
    ]);

    const users = cache.loader<string, string>({
      name: 'user',
      batch: (ids) => ids.map((id) => (id === 'x' ? new Error('no x') : `user ${id}`)),
    });
    await Promise.allSettled(['1', '2', 'x'].map((id) => users.load(id)));
    await users.load('1');
    await Promise.all([cache.getOrCompute('a', () => 1), cache.getOrCompute('a', () => 1)]);
    failReads = true;
    await cache.getOrCompute('b', () => 2, { label: 'Query.b' });
    await cache.invalidate('a');

    const snapshot = cache.metrics();
    const samples = await scrape(registry);
    let compared = 0;
    for (const counter of COUNTER_NAMES) {
      const name = CACHE_COUNTER_METRICS[counter][0];
      for (const [source, counters] of Object.entries(snapshot.sources)) {
        const value = samples.get(`${name}{source="${source}"}`) ?? 0;
        expect({ counter, source, value }).toEqual({ counter, source, value: counters[counter] });
        if (value > 0) compared++;
      }
    }
    expect(compared).toBeGreaterThan(10);
    expect(samples.get('herdcache_cache_coalesced_total{source="getOrCompute"}')).toBe(1);
    expect(samples.get('herdcache_cache_store_errors_total{source="Query.b"}')).toBe(1);
    expect(samples.get('herdcache_cache_fill_failures_total{source="user"}')).toBe(1);
    expect(samples.get('herdcache_cache_batched_keys_total{source="user"}')).toBe(3);
    // A scrape reads the snapshot again: counters are never added twice.
    await cache.getOrCompute('c', () => 3, { label: 'Query.b' });
    const again = await scrape(registry);
    expect(again.get('herdcache_cache_store_errors_total{source="Query.b"}')).toBe(2);
    expect(again.get('herdcache_cache_hits_total{source="user"}')).toBe(1);
  });

  it('fills in flight, as a gauge', async () => {
    const cache = createCache({ ttl: 60_000 });
    const registry = new Registry();
    await herdcacheMetrics({ cache, registry });
    const gate = deferred<number>();
    const pending = [cache.getOrCompute('a', () => gate.promise), cache.getOrCompute('b', () => gate.promise)];
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await scrape(registry)).get(IN_FLIGHT_METRIC)).toBe(2);
    gate.resolve(1);
    await Promise.all(pending);
    expect((await scrape(registry)).get(IN_FLIGHT_METRIC)).toBe(0);
  });

  it('invalidations waiting for a retry, as a gauge by kind', async () => {
    const memory = memoryStore();
    let down = true;
    const store: Store = {
      name: 'flaky',
      getMany: memory.getMany.bind(memory),
      setMany: memory.setMany.bind(memory),
      delete: (keys) => (down ? Promise.reject(new Error('down')) : memory.delete(keys)),
      invalidateTags: (tags) => (down ? Promise.reject(new Error('down')) : memory.invalidateTags(tags)),
      clear: memory.clear.bind(memory),
    };
    const cache = createCache({ store, ttl: 60_000 });
    const registry = new Registry();
    await herdcacheMetrics({ cache, registry });
    await cache.invalidate(['a', 'b']);
    await cache.invalidateTags(['T']);
    const samples = await scrape(registry);
    expect(samples.get(`${PENDING_INVALIDATIONS_METRIC}{kind="key"}`)).toBe(2);
    expect(samples.get(`${PENDING_INVALIDATIONS_METRIC}{kind="tag"}`)).toBe(1);
    expect(samples.get(`${PENDING_INVALIDATIONS_METRIC}{kind="clear"}`)).toBe(0);
    down = false;
    await cache.close(); // drops them (and stops the retries)
    expect((await scrape(registry)).get(`${PENDING_INVALIDATIONS_METRIC}{kind="key"}`)).toBe(0);
  });

  it('bounds the source label: past maxSources, sources are summed as "other"', async () => {
    const cache = createCache();
    const registry = new Registry();
    await herdcacheMetrics({ cache, registry, maxSources: 2 });
    for (const label of ['A', 'B', 'C', 'D']) await cache.getOrCompute(label, () => 1, { label });
    const misses = [...(await scrape(registry))].filter(([sample]) =>
      sample.startsWith('herdcache_cache_misses_total'),
    );
    expect(misses).toEqual([
      ['herdcache_cache_misses_total{source="A"}', 1],
      ['herdcache_cache_misses_total{source="B"}', 1],
      ['herdcache_cache_misses_total{source="other"}', 2],
    ]);
  });

  it("a Redis store's breaker state: closed, then open while Redis is unreachable", async () => {
    // A real client to a port nothing listens on: calls fail at once (not ready, no offline queue).
    const client = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    client.on('error', () => {});
    try {
      const store = redisStore({
        client,
        prefix: randomPrefix('metrics'),
        breaker: { threshold: 2, coolDown: 60_000 },
      });
      const cache = createCache({ store, ttl: 60_000 });
      const registry = new Registry();
      await herdcacheMetrics({ cache, registry, stores: [store] });
      const state = async () =>
        Object.fromEntries([...(await scrape(registry))].filter(([sample]) => sample.startsWith(BREAKER_METRIC)));
      expect(await state()).toEqual({
        [`${BREAKER_METRIC}{store="redis",state="closed"}`]: 1,
        [`${BREAKER_METRIC}{store="redis",state="open"}`]: 0,
        [`${BREAKER_METRIC}{store="redis",state="half-open"}`]: 0,
      });
      for (const key of ['a', 'b', 'c']) expect(await cache.getOrCompute(key, () => key)).toBe(key);
      expect(store.breakerState).toBe('open');
      expect(await state()).toMatchObject({
        [`${BREAKER_METRIC}{store="redis",state="open"}`]: 1,
        [`${BREAKER_METRIC}{store="redis",state="closed"}`]: 0,
      });
      expect(
        (await scrape(registry)).get('herdcache_cache_store_errors_total{source="getOrCompute"}'),
      ).toBeGreaterThanOrEqual(2);
    } finally {
      client.disconnect();
    }
  });

  it("a tiered store's stats: subscribed, L1 entries, promotions, published messages", async () => {
    const r = await replica({ prefix: randomPrefix('metrics-tiered'), cache: { ttl: 60_000 } });
    try {
      const registry = new Registry();
      await herdcacheMetrics({ cache: r.cache, registry, stores: [r.store, r.l2] });
      await r.cache.getOrCompute('k', () => 1);
      await r.cache.invalidate('k');
      const samples = await scrape(registry);
      const stats = r.store.stats();
      expect(stats.published).toBeGreaterThan(0);
      expect(samples.get('herdcache_tiered_subscribed{store="tiered"}')).toBe(1);
      expect(samples.get('herdcache_tiered_l1_entries{store="tiered"}')).toBe(stats.l1Size);
      expect(samples.get('herdcache_tiered_published_total{store="tiered"}')).toBe(stats.published);
      expect(samples.get('herdcache_tiered_promoted_total{store="tiered"}')).toBe(stats.promoted);
      expect(samples.get(`${BREAKER_METRIC}{store="redis",state="closed"}`)).toBe(1);
    } finally {
      await r.close();
    }
  });

  it("a Redis store's waits on other replicas' fill locks: one woken by the fill's announcement shows in the scrape", async () => {
    const clients = await Promise.all([connect(), connect(), connect()]);
    try {
      const [holderClient, waiterClient, subscriber] = clients as [Redis, Redis, Redis];
      const prefix = randomPrefix('metrics-wake');
      const holderStore = redisStore({ client: holderClient, prefix, subscriber: false });
      const holder = createCache({ store: holderStore, ttl: 60_000 });
      // A store without a subscriber (subscriber: false) only polls: no wait metrics for it.
      const holderCollectors = await herdcacheMetrics({
        cache: holder,
        registry: new Registry(),
        stores: [holderStore],
      });
      expect(holderCollectors.names.filter((name) => name.startsWith('herdcache_redis_'))).toEqual([]);
      const store = redisStore({ client: waiterClient, prefix, subscriber });
      // Poll sleeps that never end: only the announcement can answer the waiter.
      const sleeps: number[] = [];
      const clock = { now: () => Date.now(), sleep: (ms: number) => (sleeps.push(ms), new Promise<void>(() => {})) };
      const waiter = createCache({ store, ttl: 60_000, clock, lockPollInterval: 10_000, lockWaitTimeout: 60_000 });
      const registry = new Registry();
      const collectors = await herdcacheMetrics({ cache: waiter, registry, stores: [store] });
      expect(collectors.names).toEqual(
        expect.arrayContaining([
          LOCK_WAITS_METRIC,
          'herdcache_redis_announcements_listening',
          'herdcache_redis_announcement_channels',
          'herdcache_redis_lock_waits_deaf_total',
          'herdcache_redis_announcements_received_total',
        ]),
      );
      expect(await eventually(() => store.waitStats().channels === 1, 5000, 2)).toBe(true);

      const gate = deferred<string>();
      const filling = deferred<void>();
      const held = holder.getOrCompute('k', () => (filling.resolve(), gate.promise));
      await filling.promise;
      const waited = waiter.getOrCompute('k', () => 'filled-by-waiter');
      expect(await eventually(() => sleeps.length === 1, 5000, 2)).toBe(true); // waiting, on a sleep that never ends
      const before = await scrape(registry);
      expect(before.get(`${LOCK_WAITS_METRIC}{store="redis",outcome="woken"}`)).toBe(0);
      gate.resolve('filled-by-holder');
      expect(await held).toBe('filled-by-holder');
      expect(await waited).toBe('filled-by-holder');

      const samples = await scrape(registry);
      expect(store.waitStats()).toMatchObject({ woken: 1, polled: 0, deaf: 0, received: 1 });
      expect(samples.get(`${LOCK_WAITS_METRIC}{store="redis",outcome="woken"}`)).toBe(1);
      expect(samples.get(`${LOCK_WAITS_METRIC}{store="redis",outcome="polled"}`)).toBe(0);
      expect(samples.get('herdcache_redis_lock_waits_deaf_total{store="redis"}')).toBe(0);
      expect(samples.get('herdcache_redis_announcements_received_total{store="redis"}')).toBe(1);
      expect(samples.get('herdcache_redis_announcements_listening{store="redis"}')).toBe(1);
      expect(samples.get('herdcache_redis_announcement_channels{store="redis"}')).toBe(1);
      // A standalone Redis has no per-node health: no node samples.
      expect([...samples.keys()].filter((sample) => sample.startsWith(NODE_BREAKER_METRIC))).toEqual([]);
      await store.close();
    } finally {
      for (const client of clients) client.disconnect();
    }
  });

  it('one cache per registry; the same cache gets the same collectors; close() unregisters', async () => {
    const cache = createCache();
    const registry = new Registry();
    const collectors = await herdcacheMetrics({ cache, registry });
    expect(await herdcacheMetrics({ cache, registry })).toBe(collectors);
    await expect(herdcacheMetrics({ cache: createCache(), registry })).rejects.toThrow(
      /option "registry" already has herdcacheMetrics\(\) of another cache/,
    );
    collectors.close();
    expect(await registry.getMetricsAsJSON()).toEqual([]);
    await herdcacheMetrics({ cache: createCache(), registry });
  });

  it('validates its options, naming them', async () => {
    const cache = createCache();
    await expect(herdcacheMetrics({ cache: {} as never, registry: new Registry() })).rejects.toThrow(/option "cache"/);
    await expect(herdcacheMetrics({ cache, registry: {} as never })).rejects.toThrow(/option "registry"/);
    await expect(herdcacheMetrics({ cache, registry: new Registry(), maxSources: 0 })).rejects.toThrow(
      /option "maxSources"/,
    );
    await expect(herdcacheMetrics({ cache, registry: new Registry(), maxNodes: 1.5 })).rejects.toThrow(
      /option "maxNodes"/,
    );
    await expect(
      herdcacheMetrics({ cache, registry: new Registry(), stores: [memoryStore(), memoryStore()] }),
    ).rejects.toThrow(/option "stores"/);
  });
});

/**
 * The registry on the Redis store, in one process: Redis killed mid-run and restarted, and an
 * invalidation racing a fill on another replica (two registries with two connections are two
 * replicas: they never coalesce with each other).
 */
import Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { redisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { connect, eventually, randomPrefix, sleep } from './helpers';

describe('Redis killed mid-run, then restarted', () => {
  let server: RedisServer;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    client = await connect(server.url, { retryStrategy: () => 50, disconnectTimeout: 10 });
  });

  afterAll(async () => {
    client.disconnect();
    await server.stop('SIGKILL');
  });

  it('keeps every load succeeding (computed, errors counted), and hits resume after the restart', async () => {
    const cache = createCache({
      // 1 s: long enough that a loaded machine answers the warm-up in time (no store error there);
      // once Redis is down, calls fail at once (the client is not connected) and do not wait it out.
      store: redisStore({ client, prefix: 'kill:', commandTimeout: 1000, breaker: { threshold: 3, coolDown: 200 } }),
      ttl: 60_000,
    });
    const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
    let computed = 0;
    const fill = ({ key }: { key: string }) => {
      computed++;
      return `value:${key}`;
    };
    const loadAll = () => Promise.all(keys.map((key) => cache.getOrCompute(key, fill)));

    expect(await loadAll()).toEqual(keys.map((key) => `value:${key}`));
    expect(await loadAll()).toEqual(keys.map((key) => `value:${key}`));
    expect(cache.metrics().total).toMatchObject({ fills: 10, hits: 10, storeErrors: 0 });

    // A steady trickle of loads runs across the kill; none of them may fail or hang.
    let running = true;
    const failures: unknown[] = [];
    let trickled = 0;
    const slowest = { ms: 0 };
    const trickle = (async () => {
      while (running) {
        const start = performance.now();
        await cache.getOrCompute(`t${trickled % 5}`, fill).catch((error: unknown) => failures.push(error));
        slowest.ms = Math.max(slowest.ms, performance.now() - start);
        trickled++;
        await sleep(5);
      }
    })();
    // Counted, not timed: a loaded machine runs fewer loops per millisecond, never fewer loads here.
    expect(await eventually(() => trickled >= 3, 10_000)).toBe(true);
    await server.stop('SIGKILL');
    await eventually(() => client.status !== 'ready', 2000);
    const computedBefore = computed;
    expect(await loadAll()).toEqual(keys.map((key) => `value:${key}`));
    expect(computed - computedBefore).toBe(10); // recomputed: the store was unreachable
    // Some of the trickle's loads ran entirely while Redis was down.
    const trickledWhileDown = trickled;
    expect(await eventually(() => trickled >= trickledWhileDown + 3, 10_000)).toBe(true);
    running = false;
    await trickle;
    expect(failures).toEqual([]);
    // Bounded: a load costs at most one command timeout (1 s) per store call on its path (three);
    // the margin is for a loaded machine, the bound catches a hang (ioredis would queue forever).
    expect(slowest.ms).toBeLessThan(10_000);
    const outage = cache.metrics().total;
    expect(outage.storeErrors).toBeGreaterThan(0);

    // Restart on the same port (empty: no persistence). Loads fill and write again, then hit.
    server = await startRedisServer({ port: server.port });
    expect(await eventually(() => client.status === 'ready', 5000)).toBe(true);
    await sleep(250); // the breaker's cool-down
    expect(
      await eventually(
        async () => {
          await loadAll();
          const before = cache.metrics().total.hits;
          await loadAll();
          return cache.metrics().total.hits - before === keys.length;
        },
        5000,
        50,
      ),
    ).toBe(true);
    expect(await client.exists(...keys.map((key) => `kill:{${key}}`))).toBe(keys.length);
  });
});

describe('invalidate during a fill', () => {
  let clientA: Redis;
  let clientB: Redis;
  let prefix: string;

  beforeAll(async () => {
    clientA = await connect();
    clientB = await connect();
  });

  afterAll(async () => {
    await clientA.quit();
    await clientB.quit();
  });

  beforeEach(() => {
    prefix = randomPrefix('invalidate');
  });

  it('on another replica: the fill computed before the invalidation is not written (fenced)', async () => {
    const replicaA = createCache({ store: redisStore({ client: clientA, prefix }), ttl: 60_000 });
    const replicaB = createCache({ store: redisStore({ client: clientB, prefix }), ttl: 60_000 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const filling = new Promise<void>((resolve) => (started = resolve));
    const loadA = replicaA.getOrCompute('user:1', async () => {
      started();
      await gate;
      return 'old, read before the update';
    });
    await filling;
    expect(await clientA.exists(`${prefix}{user:1}:lock`)).toBe(1);
    // The data changed; replica B invalidates while A's fill is still running.
    await replicaB.invalidate('user:1');
    release();
    // A's own caller gets what A computed, but the shared cache does not keep it.
    expect(await loadA).toBe('old, read before the update');
    await sleep(20);
    expect(await clientA.exists(`${prefix}{user:1}`)).toBe(0);
    expect(await replicaB.getOrCompute('user:1', () => 'new')).toBe('new');
    expect(await replicaA.getOrCompute('user:1', () => 'not called')).toBe('new');
  });

  it('on the same replica: the fill is abandoned and nothing stale is written', async () => {
    const cache = createCache({ store: redisStore({ client: clientA, prefix }), ttl: 60_000 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const load = cache.getOrCompute('user:2', async () => {
      calls++;
      if (calls === 1) {
        await gate;
        return 'old';
      }
      return 'new';
    });
    await eventually(() => calls === 1, 2000, 5);
    await cache.invalidate('user:2');
    release();
    // The waiter starts over after the invalidation and gets the value computed after it.
    expect(await load).toBe('new');
    await sleep(20);
    expect(JSON.parse((await clientA.get(`${prefix}{user:2}`))!).d).toBe('new');
  });
});

describe('stale-while-revalidate across replicas', () => {
  let clients: Redis[];

  beforeAll(async () => {
    clients = await Promise.all([connect(), connect(), connect()]);
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit()));
  });

  it('serves the stale value at once on every replica, and one replica refreshes it for the fleet', async () => {
    const prefix = randomPrefix('swr');
    const clock = manualClock();
    const replicas = clients.map((client) =>
      createCache({ store: redisStore({ client, prefix }), clock, ttl: 1_000, swr: 60_000 }),
    );
    let refreshes = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    expect(await replicas[0]!.getOrCompute('k', () => 'v1')).toBe('v1');
    clock.advance(2_000); // stale, within grace
    const refresh = async () => {
      refreshes++;
      await gate;
      return 'v2';
    };
    // Every replica answers with the stale value without waiting for the (gated) refresh.
    const answers = await Promise.all(
      replicas.map((cache) => Promise.all(Array.from({ length: 50 }, () => cache.getOrCompute('k', refresh)))),
    );
    expect(answers.flat().every((value) => value === 'v1')).toBe(true);
    await eventually(() => refreshes === 1, 2_000, 5);
    await sleep(50);
    expect(refreshes).toBe(1);
    release();
    expect(
      await eventually(async () => (await replicas[2]!.getOrCompute('k', () => 'not called')) === 'v2', 2_000, 10),
    ).toBe(true);
    expect(refreshes).toBe(1);
    const staleServed = replicas.reduce((sum, cache) => sum + cache.metrics().total.staleServed, 0);
    expect(staleServed).toBeGreaterThanOrEqual(3);
  });
});

/**
 * No stale sets on Redis, randomized: the model of test/core/no-stale-sets.test.ts over two replicas
 * (two registries with their own connections) sharing one Redis, with the Redis store and with the
 * tiered store (L1 + L2 + pub/sub). Up to 1,000 schedules each in the suite within a time budget,
 * at least 100 (see ScheduleBudget); HERDCACHE_NSS_SCHEDULES=10000 runs exactly that many (about
 * 70 s per world here).
 */
import type Redis from 'ioredis';
import type { Cache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { redisStore } from '../../src/redis/redis-store';
import { tieredStore, type TieredStore } from '../../src/redis/tiered';
import { flush } from '../helpers';
import {
  ioIdle,
  ioSettle,
  lockOptions,
  observedCache,
  pollingClock,
  report,
  run,
  SEED,
  timeoutFor,
  type ScheduleBudget,
  type Tallies,
  type World,
} from './tiered/interleavings';
import { connect, randomPrefix } from './helpers';

/**
 * The worlds test interleavings, not faults (test/redis/faults.test.ts does those): a store call
 * that fails under a loaded machine (timeout, open breaker) would lose an invalidation, which the
 * registry documents as counted-not-retried, and the model would report it as a stale set. So the
 * store here neither times out early nor trips a breaker, and every world ends by checking that no
 * store call failed at all.
 */
const BUDGET: ScheduleBudget = { min: 100, minRacingFills: 100, max: 1000, budgetMs: 6_000 };

const patient = { commandTimeout: 10_000, breaker: false } as const;

function expectNoStoreErrors(caches: readonly Cache[]): void {
  for (const cache of caches) expect(cache.metrics().total.storeErrors).toBe(0);
}

/** Runs the schedules; a violation's message also says whether store calls failed meanwhile. */
async function runWorld(world: World, caches: readonly Cache[], seed: number) {
  try {
    return await run(world, BUDGET, seed);
  } catch (error) {
    const errors = caches.map((cache) => cache.metrics().total.storeErrors).join(', ');
    throw new Error(`${(error as Error).message}\n(store errors per replica: ${errors})`);
  }
}

const tallies: Tallies = {};

afterAll(() => report(tallies));

describe('on Redis', () => {
  const clients: Redis[] = [];

  afterAll(async () => {
    for (const client of clients) if (client.status !== 'end') client.disconnect();
  });

  it(
    `redis store, two replicas: up to ${BUDGET.max} schedules (at least ${BUDGET.min})`,
    async () => {
      const prefix = randomPrefix('nss-redis');
      const caches: Cache[] = [];
      for (let i = 0; i < 2; i++) {
        const client = await connect();
        clients.push(client);
        caches.push(
          observedCache(i, { store: redisStore({ client, prefix, ...patient }), clock: pollingClock, ...lockOptions }),
        );
      }
      const world: World = {
        name: 'redis',
        caches,
        settle: ioSettle,
        idle: ioIdle,
        mark: () => 0,
        knows: () => true,
        close: async () => {},
      };
      const started = Date.now();
      const tally = await runWorld(world, caches, SEED + 1);
      tallies.redis = { ...tally, ms: Date.now() - started };
      expect(tally.schedules).toBeGreaterThanOrEqual(BUDGET.min);
      expect(tally.racingFills).toBeGreaterThanOrEqual(BUDGET.minRacingFills);
      expectNoStoreErrors(caches);
    },
    timeoutFor(BUDGET),
  );

  it(
    `tiered store (L1 + Redis L2 + pub/sub), two replicas: up to ${BUDGET.max} schedules (at least ${BUDGET.min})`,
    async () => {
      const prefix = randomPrefix('nss-tiered');
      const caches: Cache[] = [];
      const stores: TieredStore[] = [];
      for (let i = 0; i < 2; i++) {
        const client = await connect();
        const subscriber = await connect();
        clients.push(client, subscriber);
        const store = tieredStore({
          l2: redisStore({ client, prefix, ...patient }),
          subscriber,
          l1: memoryStore({ max: 10_000 }),
          l1Ttl: 60_000,
        });
        stores.push(store);
        caches.push(observedCache(i, { store, clock: pollingClock, ...lockOptions }));
      }
      for (const store of stores) while (!store.subscribed) await flush(1);
      const world: World = {
        name: 'tiered',
        caches,
        settle: ioSettle,
        idle: ioIdle,
        // With two replicas, the other one has applied an invalidation once it has received as many
        // messages as the invalidating one had published when its call completed (messages from one
        // publisher arrive in order).
        mark: (from) => stores[from]!.stats().published,
        knows: (to, from, mark) => to === from || stores[to]!.stats().received >= mark,
        close: async () => {},
      };
      const started = Date.now();
      const tally = await runWorld(world, caches, SEED + 2);
      tallies.tiered = { ...tally, ms: Date.now() - started };
      expect(tally.schedules).toBeGreaterThanOrEqual(BUDGET.min);
      expect(tally.racingFills).toBeGreaterThanOrEqual(BUDGET.minRacingFills);
      expectNoStoreErrors(caches);
      for (const cache of caches) await cache.close();
    },
    timeoutFor(BUDGET),
  );
});

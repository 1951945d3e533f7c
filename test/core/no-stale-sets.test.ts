/**
 * No stale sets, randomized: an invalidation racing a fill never leaves the old value cached, on
 * any tier and any replica.
 *
 * The model. A "database" holds a version per key. Every fill returns the version it read when it
 * started. An invalidation first bumps the database versions of what it invalidates (the write),
 * then calls invalidate(key) or invalidateTags(tags); once that call has completed, a read issued
 * afterwards must return a version >= the one the write produced. Fills are deferred: the schedule
 * decides when each ends, so fills routinely start before an invalidation and end after it.
 *
 * One schedule = a random interleaving of SCHEDULE_STEPS steps drawn from {read (which starts a
 * fill on a miss), fill end (or failure), invalidate(key), invalidateTags(tag), let I/O run} over
 * four keys (tagged [A], [A, B], [B], and untagged), then a drain (every fill ends), then a final
 * read of every key on every replica, which must all be current: whatever is still cached anywhere
 * after the dust settles is the proof that nothing stale was set.
 *
 * Worlds and counts (seeded PRNG; the seed and the failing schedule's trace are in the message):
 * - memory: one registry, in-process store, manual clock, deterministic: up to 10,000 schedules;
 * - redis: two registries (two replicas: two connections) on one Redis: up to 1,000 schedules;
 * - tiered: two registries, each with its L1 + Redis L2 + subscriber: up to 1,000 schedules.
 * Each world runs the schedules of one seeded sequence within a time budget, with a floor (see
 * ScheduleBudget): a loaded machine runs fewer of them rather than time out. The Redis worlds run
 * fewer (each step is real I/O); they live in test/redis/no-stale-sets.test.ts, the driver in
 * test/redis/tiered/interleavings.ts. HERDCACHE_NSS_SCHEDULES=n runs exactly n per world, unbudgeted.
 *
 * What a read may see, precisely. On the replica that invalidated: nothing older, ever. On another
 * replica: nothing older once the invalidation is known there (Redis: when the call completed;
 * tiered: when that replica applied the pub/sub message), with one documented exception counted
 * apart: a read that joins a fill already in flight in its own process (single-flight) receives that
 * fill's result, which may predate another replica's invalidation. That value is answered, never
 * cached (the final reads prove it).
 */
import { manualClock } from '../../src/core/freshness';
import { memoryStore } from '../../src/core/memory';
import { flush } from '../helpers';
import {
  observedCache,
  report,
  run,
  SCHEDULE_STEPS,
  SEED,
  timeoutFor,
  type ScheduleBudget,
  type Tallies,
  type World,
} from '../redis/tiered/interleavings';

const tallies: Tallies = {};

afterAll(() => report(tallies));

/** About 10,000 on a quiet machine; never fewer than 1,000 (HERDCACHE_NSS_SCHEDULES=n: exactly n). */
const BUDGET: ScheduleBudget = { min: 1_000, minRacingFills: 1_000, max: 10_000, budgetMs: 6_000 };

it(
  `memory store, one registry: up to ${BUDGET.max} schedules in ${BUDGET.budgetMs / 1000} s (at least ${BUDGET.min}), deterministic`,
  async () => {
    const clock = manualClock();
    const world: World = {
      name: 'memory',
      caches: [observedCache(0, { store: memoryStore({ max: 100_000 }), clock })],
      settle: (rng) => flush(rng.int(3)),
      idle: () => flush(3),
      mark: () => 0,
      knows: () => true,
      close: async () => {},
    };
    const started = Date.now();
    const tally = await run(world, BUDGET, SEED);
    tallies.memory = { ...tally, ms: Date.now() - started };
    expect(tally.schedules).toBeGreaterThanOrEqual(BUDGET.min);
    expect(tally.coalescedStale).toBe(0); // one process: its own invalidations abandon its fills
    expect(tally.invalidations).toBeGreaterThan(tally.schedules * SCHEDULE_STEPS * 0.2);
    expect(tally.racingFills).toBeGreaterThanOrEqual(BUDGET.minRacingFills);
  },
  timeoutFor(BUDGET),
);

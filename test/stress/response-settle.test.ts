/**
 * Every request to the response layer answers, and every answer is one the cache may give: the
 * seeded stress of ./response-settle.ts on Apollo Server 5 and Yoga 5, on the memory store and on
 * two replicas sharing one Redis (its own redis-server, paused for a while in one seed). A failure
 * prints the seed; replay one with RESPONSE_SEED=<seed> npx jest test/stress/response-settle.
 */
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { responseStress, responseSummary, type ResponseStressOptions } from './response-settle';

const replay = process.env.RESPONSE_SEED === undefined ? undefined : Number(process.env.RESPONSE_SEED);
const seeds = (base: number) => (replay !== undefined ? [replay] : [base, base + 1, base + 2]);

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis.stop();
});

/** Answers over maxBytes (`big`: served, not stored) across the runs: the mix did exercise them. */
let oversized = 0;
/** @cached lists answered item by item (a failed middle item) across the runs: the mix exercised them. */
let partialLists = 0;
/** Answers to the session responseCache.enabled disables, bypassed (`disabled`), across the runs. */
let disabled = 0;
/** Yoga batches answered across the runs (the same operation twice in some). */
let batches = 0;
/** cache.clear() calls across the runs. */
let clears = 0;
afterAll(() => {
  if (replay === undefined) expect(disabled).toBeGreaterThan(0);
  if (replay === undefined) expect(batches).toBeGreaterThan(0);
  if (replay === undefined) expect(oversized).toBeGreaterThan(0);
  if (replay === undefined) expect(partialLists).toBeGreaterThan(0);
  if (replay === undefined) expect(clears).toBeGreaterThan(0);
});

const REQUESTS = 250;

describe('the response layer under a seeded random mix: every request answers, never a wrong answer', () => {
  const cases: [ResponseStressOptions['store'], number[], number | undefined][] = [
    // 11 and 67: a run apart after an invalidation there reads a per-request memo (StressContext.memo)
    // filled before it, unless each context is lent to one run apart and never the executed one's.
    ['memory', replay !== undefined ? [replay] : [...seeds(1), 11, 67], undefined],
    // A store of 12 entries: responses and @cached fields evict each other, and the fields' slots
    // are emptied and restamped (core/memory.ts) amid the aborts and invalidations.
    ['memory', replay !== undefined ? [] : seeds(301), 12],
    ['redis', seeds(101), undefined],
  ];
  for (const [store, storeSeeds, memoryMax] of cases) {
    if (storeSeeds.length === 0) continue;
    it.each(storeSeeds)(`${store}${memoryMax === undefined ? '' : ` (max ${memoryMax})`}, seed %i`, async (seed) => {
      const report = await responseStress({
        seed,
        requests: REQUESTS,
        store,
        memoryMax,
        redisUrl: redis.url,
        // One seed pauses the Redis server mid-run (past the command timeout): the requests still answer.
        pause: store === 'redis' && seed === 102 ? { pid: redis.pid, at: REQUESTS / 3, ms: 400 } : undefined,
      });
      const problems = {
        pending: report.pending,
        wrong: report.wrong,
        leaks: report.leaks,
        stale: report.stale,
        unhandled: report.unhandled,
        inFlightAfter: report.inFlightAfter,
        countMismatch: report.countMismatch,
        burstExtraExecutions: report.burstExtraExecutions,
      };
      const clean = {
        pending: [],
        wrong: [],
        leaks: 0,
        stale: [],
        unhandled: [],
        inFlightAfter: 0,
        countMismatch: [],
        burstExtraExecutions: [],
      };
      if (JSON.stringify(problems) !== JSON.stringify(clean)) console.error(responseSummary(report));
      expect(problems).toEqual(clean);
      // The mix did exercise the layer: stored answers, shared executions, stale ones, client aborts.
      expect(report.answered).toBeGreaterThan(REQUESTS / 2);
      expect(report.outcomes.hit ?? 0).toBeGreaterThan(0);
      expect(report.burstCoalesced).toBeGreaterThan(0);
      expect(report.quietBursts).toBeGreaterThan(0);
      expect(report.outcomes.stale ?? 0).toBeGreaterThan(0);
      oversized += report.outcomes.oversized ?? 0;
      partialLists += report.partialLists;
      disabled += report.disabled;
      batches += report.batches;
      clears += report.clears;
      expect(report.aborted).toBeGreaterThan(0);
      if (store === 'redis') expect(report.lockContended).toBeGreaterThan(0);
      // The small store did evict: more keys written than it holds, and it was full.
      if (memoryMax !== undefined) {
        expect(report.keysWritten).toBeGreaterThan(2 * memoryMax);
        expect(report.storeSize).toBe(memoryMax);
      }
    });
  }
});

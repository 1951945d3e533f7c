/**
 * Every promise herdcache returns settles (issue 17): the seeded stress of ./settle.ts, quick form.
 * A failure prints the seed and the operations left pending; replay one seed with
 * SETTLE_SEED=<seed> npx jest test/stress/settle. The long form runs in `npm run chaos`.
 */
import type Redis from 'ioredis';
import { connect } from '../redis/helpers';
import { settleStress, summary, type StressStore } from './settle';

const replay = process.env.SETTLE_SEED === undefined ? undefined : Number(process.env.SETTLE_SEED);
const seeds = (count: number, base: number) =>
  replay !== undefined ? [replay] : Array.from({ length: count }, (_, i) => base + i);

describe('every promise settles: seeded random stress over every public path', () => {
  let client: Redis;
  let subscriber: Redis;

  beforeAll(async () => {
    client = await connect();
    subscriber = await connect();
  });

  afterAll(async () => {
    client.disconnect();
    subscriber.disconnect();
  });

  const cases: [StressStore, number[], number][] = [
    ['memory', seeds(6, 1), 1200],
    ['flaky', seeds(3, 301), 1200],
    ['redis', seeds(3, 101), 800],
    ['tiered', seeds(3, 201), 800],
  ];
  for (const [store, storeSeeds, ops] of cases) {
    it.each(storeSeeds)(
      `${store} store, seed %i: nothing pending, no wrong value, nothing unhandled, nothing in flight`,
      async (seed) => {
        const report = await settleStress({ seed, ops, store, client, subscriber });
        const problems = {
          pending: report.pending,
          wrong: report.wrong,
          unhandled: report.unhandled,
          inFlightAfter: report.inFlightAfter,
          pendingInvalidationsAfter: report.pendingInvalidationsAfter,
        };
        const problemCount =
          report.pending.length +
          report.wrong.length +
          report.unhandled.length +
          report.inFlightAfter +
          report.pendingInvalidationsAfter;
        if (problemCount > 0) console.error(summary(report));
        expect(problems).toEqual({
          pending: [],
          wrong: [],
          unhandled: [],
          inFlightAfter: 0,
          pendingInvalidationsAfter: 0,
        });
        // The run did exercise both outcomes (a stress that never rejects or never resolves tests little).
        expect(report.resolved).toBeGreaterThan(ops / 10);
        expect(report.rejected).toBeGreaterThan(ops / 20);
        // The flaky store failed calls, invalidations among them: the retries had work to send.
        if (store === 'flaky') {
          expect(report.storeErrors).toBeGreaterThan(ops / 20);
          expect(Math.max(report.pendingSeen, report.pendingAtRecovery)).toBeGreaterThan(0);
        }
        // On Redis a peer cache contends for the same fill locks: lock waits were part of the run.
        if (store === 'redis') expect(report.lockContended).toBeGreaterThan(0);
      },
    );
  }
});

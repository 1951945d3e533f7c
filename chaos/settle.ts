/**
 * The long form of the settle stress (test/stress/settle.ts): many seeds on each store, against a
 * redis-server started here. Hard invariant: every operation settles, each value is its key's,
 * nothing unhandled, nothing left in flight. Bounded by a count of seeds and a time budget.
 */
import Redis from 'ioredis';
import { startRedisServer } from '../test/setup/redis-server';
import { settleStress, summary, type StressStore } from '../test/stress/settle';

export async function settleRound(quick: boolean): Promise<string[]> {
  const server = await startRedisServer();
  const client = new Redis(server.url);
  const subscriber = new Redis(server.url);
  const failures: string[] = [];
  const budgetMs = quick ? 15_000 : 120_000;
  const started = Date.now();
  const totals = { runs: 0, ops: 0, rejected: 0 };
  try {
    const stores: StressStore[] = ['memory', 'redis', 'tiered', 'flaky'];
    for (let seed = 10_000; Date.now() - started < budgetMs; seed++) {
      const store = stores[seed % stores.length]!;
      const report = await settleStress({ seed, ops: quick ? 1000 : 5000, store, client, subscriber });
      totals.runs++;
      totals.ops += report.issued;
      totals.rejected += report.rejected;
      const problems =
        report.pending.length +
        report.wrong.length +
        report.unhandled.length +
        report.inFlightAfter +
        report.pendingInvalidationsAfter;
      if (problems > 0) {
        failures.push(
          `settle: ${summary(report)}: ${[...report.pending, ...report.wrong, ...report.unhandled].slice(0, 5).join(' | ')}`,
        );
      }
    }
  } finally {
    client.disconnect();
    subscriber.disconnect();
    await server.stop('SIGKILL');
  }
  console.log(
    `settle stress: ${totals.runs} seeded runs (memory, redis, tiered, a flaky store), ${totals.ops} operations (${totals.rejected} rejected), ${failures.length} runs with an operation left pending or wrong, ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return failures;
}

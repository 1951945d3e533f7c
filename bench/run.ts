/**
 * npm run bench [-- --quick] [-- --only 1,3]
 *
 * herdcache next to the alternatives users would pick instead, every figure measured in this
 * one run: a markdown table (one row per workload, one column per system, plus herdcache / best
 * peer), printed and written to bench/RESULTS.md with the machine, Node version and date.
 *
 * The Redis rows use REDIS_URL when it points at this machine, else a throwaway redis-server
 * from PATH on a free 127.0.0.1 port; without either, they are
 * printed as skipped with the reason. Every loop is bounded in count and time.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { checkRedisStore, findRedis, loadRedisStore, type RedisEnv, type RedisStoreFactory } from './lib/redis';
import { source } from './lib/package';
import { machine, markdownNotes, markdownTable, skippedRow, type Row } from './lib/report';
import { batchWindow } from './workloads/batch-window';
import { graphqlEndToEnd } from './workloads/graphql';
import { graphqlInProcess } from './workloads/graphql-inprocess';
import { hotHits } from './workloads/hot-hits';
import { redisBatch } from './workloads/redis-batch';
import { stampedeChart } from './lib/chart';
import { replicas } from './workloads/replicas';
import { responseCaches } from './workloads/response-cache';
import { stampede } from './workloads/stampede';
import { swr } from './workloads/swr';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const onlyArg = args.find((a, i) => a.startsWith('--only=') || args[i - 1] === '--only');
const only = onlyArg === undefined ? undefined : new Set(onlyArg.replace('--only=', '').split(',').map(Number));

/** Sizes: the full run as issue 5 specifies; --quick shrinks counts and times, not the shape. */
const SIZES = quick
  ? {
      stampedeLoads: 2_000,
      replicaLoads: 200,
      replicaTrials: 1,
      hotRounds: 3,
      hotRoundMs: 40,
      batchRequests: 100,
      swrDurationMs: 2_200,
      windowRequests: 200,
    }
  : {
      stampedeLoads: 10_000,
      replicaLoads: 1_000,
      replicaTrials: 3,
      hotRounds: 7,
      hotRoundMs: 250,
      batchRequests: 500,
      swrDurationMs: 3_500,
      windowRequests: 1_000,
    };

/** The commit measured, and whether src/ differs from it (others edit the same tree). */
function revision(): string {
  try {
    const git = (...a: string[]) =>
      execFileSync('git', a, {
        cwd: join(__dirname, '..'),
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    const dirty = git('status', '--porcelain', '--', 'src').length > 0;
    return `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' with uncommitted changes in src/' : ''}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

const TITLES = {
  1: ['1. Stampede, one process', 'fills · p50 / p99'],
  2: ['2. Stampede, replicas', 'fills fleet-wide'],
  3: ['3. Hot hits, memory', 'ns/op'],
  4: ['4. Batched list over Redis', 'Redis commands per request · latency'],
  5: ['5. Expiry under load (SWR)', 'requests that waited on a refill · fills'],
  6: ['6. GraphQL end to end', 'req/s · p99, cached vs uncached'],
  7: ['7. GraphQL in process', 'µs per operation'],
  8: [
    '8. Batch windows (batchScheduleFn) under concurrent requests',
    'database batch calls · p50 / p99 request latency',
  ],
  9: [
    '9. Whole-response cache over HTTP',
    "req/s vs Apollo's response cache · varied pages vs fields alone · cold executions",
  ],
} as const;

async function step(n: keyof typeof TITLES, work: () => Promise<Row>): Promise<Row | undefined> {
  if (only !== undefined && !only.has(n)) return undefined;
  const started = Date.now();
  log(`${TITLES[n][0]} …`);
  try {
    const row = await work();
    log(
      `${TITLES[n][0]}: ${row.skipped === undefined ? 'done' : `skipped (${row.skipped})`} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    return row;
  } catch (error) {
    // One broken workload must not hide the others: its row says what failed.
    log(`${TITLES[n][0]} failed: ${(error as Error).stack ?? String(error)}`);
    return skippedRow(TITLES[n][0], TITLES[n][1], `failed: ${(error as Error).message}`);
  }
}

async function main(): Promise<void> {
  const began = Date.now();
  const load = loadavg();
  log(`${quick ? 'quick' : 'full'} run on ${machine()}; herdcache from ${source}`);

  let redis: RedisEnv | undefined;
  let noRedis: string | undefined;
  let store: RedisStoreFactory | undefined;
  const needRedis = only === undefined || only.has(2) || only.has(4);
  if (needRedis) {
    const factory = loadRedisStore();
    if (typeof factory === 'string') noRedis = factory;
    else {
      const found = await findRedis();
      if (typeof found === 'string') noRedis = found;
      else {
        redis = found;
        log(`Redis: ${found.url} (${found.origin})`);
        const broken = await checkRedisStore(factory, found.url);
        if (broken !== undefined) noRedis = broken;
        else store = factory;
      }
    }
  }

  const rows: Row[] = [];
  const push = (row: Row | undefined) => row !== undefined && rows.push(row);
  try {
    // Hot hits first: a fresh process, before the other workloads have shaped the heap and the JIT.
    push(await step(3, async () => (await hotHits({ rounds: SIZES.hotRounds, roundMs: SIZES.hotRoundMs })).row));
    push(await step(1, () => stampede({ loads: SIZES.stampedeLoads, fillMs: 20 })));
    push(
      await step(2, async () =>
        redis !== undefined && store !== undefined
          ? replicas({
              url: redis.url,
              replicas: 4,
              loads: SIZES.replicaLoads,
              fillMs: 20,
              trials: SIZES.replicaTrials,
            })
          : skippedRow(...TITLES[2], noRedis ?? 'no Redis'),
      ),
    );
    push(
      await step(4, async () =>
        redis !== undefined && store !== undefined
          ? redisBatch({ url: redis.url, store, keys: 100, requests: SIZES.batchRequests })
          : skippedRow(...TITLES[4], noRedis ?? 'no Redis'),
      ),
    );
    push(
      await step(5, () =>
        swr({
          keys: 5,
          fillMs: 20,
          ttlMs: 1_000,
          swrMs: 2_000,
          durationMs: SIZES.swrDurationMs,
          perTick: 5,
          tickMs: 2,
        }),
      ),
    );
    push(await step(6, () => graphqlEndToEnd({ quick })));
    push(
      await step(7, () =>
        graphqlInProcess({ rounds: SIZES.hotRounds, roundMs: SIZES.hotRoundMs, children: quick ? 1 : 5 }),
      ),
    );
    push(await step(8, () => batchWindow({ requests: SIZES.windowRequests, perMs: 4, keysPerRequest: 5, fillMs: 5 })));
    push(await step(9, () => responseCaches({ quick })));
  } finally {
    await redis?.stop();
  }
  rows.sort((a, b) => a.workload.localeCompare(b.workload, 'en', { numeric: true }));

  const elapsed = ((Date.now() - began) / 1000).toFixed(0);
  const table = markdownTable(rows);
  const notes = markdownNotes(rows);
  const header = [
    '# herdcache benchmark results',
    '',
    `- Machine: ${machine()}`,
    `- Date: ${new Date().toISOString()}`,
    `- Commit: ${revision()}`,
    `- herdcache measured: ${source}`,
    `- Mode: ${quick ? '`--quick` (smaller counts; CI checks that it runs)' : 'full'}${only ? `, only workloads ${[...only].join(', ')}` : ''}; took ${elapsed} s`,
    `- Load average at start: ${load.map((x) => x.toFixed(2)).join(' / ')} (a shared machine: absolute figures move, ratios measured side by side in one run hold better)`,
    `- Redis: ${redis ? `${redis.origin}` : `none (${noRedis ?? 'not needed'})`}`,
    '- Cells read: herdcache / peers / physical limit; "n/a" where a system does not apply.',
    '',
  ].join('\n');
  const document = `${header}\n${table}\n\n## How each row was measured\n\n${notes}\nRegenerate with \`npm run bench\` (\`-- --quick\` for the CI-sized run).\n`;
  console.log(`\n${table}\n`);
  console.log(notes);
  // A workload that threw is a broken harness, not a skip: fail the run so CI notices.
  const failed = rows.filter((row) => row.skipped?.startsWith('failed'));
  if (failed.length > 0) {
    log(`failed: ${failed.map((row) => row.workload).join(', ')}`);
    process.exitCode = 1;
  }
  // Partial or quick runs print but do not overwrite the published full results.
  if (only === undefined && !quick) {
    const out = join(__dirname, 'RESULTS.md');
    writeFileSync(out, document);
    log(`wrote ${out} (${elapsed} s)`);
    const chart = stampedeChart(rows.filter((row) => row.fills !== undefined));
    if (chart !== undefined) {
      writeFileSync(join(__dirname, 'stampede.svg'), chart);
      log(`wrote ${join(__dirname, 'stampede.svg')}`);
    }
  }
}

main().then(
  () => {
    // Peers may leave timers (async-cache-dedupe's clock, bentocache's cleaners): the run is over.
    process.exit(process.exitCode ?? 0);
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

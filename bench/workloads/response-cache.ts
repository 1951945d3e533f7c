/**
 * Workload 9, whole-response caches over HTTP (servers in child processes, NODE_ENV=production):
 *   (a) one identical query, warm: req/s of herdcache's response layer vs Apollo's response-cache
 *       plugin (autocannon, 10 connections);
 *   (b) 1,000 varied pages, each requested once (cold for the response layer, fields warm): req/s
 *       of the response layer + @cached fields vs the @cached fields alone (what the layer costs
 *       on misses);
 *   (c) 100 concurrent cold identical queries: executions of the operation (root resolver calls)
 *       with herdcache, Apollo's plugin, and Envelop's plugin, on Apollo 5 and on Yoga 5.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { skippedRow, type Row } from '../lib/report';
import { count, ratio } from '../lib/stats';
import type { ResponseMode } from './response-server';

export interface ResponseCacheOptions {
  readonly quick: boolean;
}

interface AutocannonResult {
  requests: { average: number; total: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;

const IDENTICAL = '{ items { id name detail { id text } } }';
const COLD = '{ items { id name } }';
const headers = { 'content-type': 'application/json' };

function message<T>(child: ChildProcess): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`the response-cache server exited with code ${code}`));
    child.once('exit', onExit);
    child.once('message', (m) => {
      child.off('exit', onExit);
      const error = (m as { error?: string }).error;
      if (error !== undefined) reject(new Error(error));
      else resolve(m as T);
    });
  });
}

/** What a server reports: its root resolver's calls, its database reads, its process CPU time. */
interface ServerStats {
  executions: number;
  dbQueries: number;
  cpu: { user: number; system: number };
}

/** Runs `work` against a fresh server in `mode`, then stops it. */
async function withServer<T>(
  mode: ResponseMode,
  work: (url: string, stats: () => Promise<ServerStats>) => Promise<T>,
): Promise<T> {
  const child = fork(join(__dirname, 'response-server.ts'), [], {
    env: { ...process.env, HERDCACHE_BENCH_MODE: mode, NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  try {
    const { url } = await message<{ url: string }>(child);
    const stats = () => {
      const reply = message<ServerStats>(child);
      child.send('stats');
      return reply;
    };
    return await work(url, stats);
  } finally {
    if (child.connected) child.disconnect();
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  }
}

interface Item {
  id: string;
  detail?: { text: string };
}
interface Body {
  data?: { items: Item[] };
}

async function post(url: string, query: string, variables?: Record<string, unknown>): Promise<Required<Body>> {
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const body = (await response.json()) as Body & { errors?: unknown };
  if (!response.ok || body.errors !== undefined || body.data === undefined)
    throw new Error(`unexpected GraphQL response: ${JSON.stringify(body).slice(0, 300)}`);
  return body as Required<Body>;
}

function failures(result: AutocannonResult): number {
  return result.errors + result.timeouts + result.non2xx;
}

/** (a) warm identical query: req/s. */
async function identical(
  mode: ResponseMode,
  seconds: number,
): Promise<{ rps: number; failed: number; queries: number }> {
  return withServer(mode, async (url, stats) => {
    for (let i = 0; i < 3; i++) {
      const body = await post(url, IDENTICAL);
      if (body.data.items.length !== 100 || typeof body.data.items[99]?.detail?.text !== 'string')
        throw new Error('unexpected items');
    }
    const before = (await stats()).dbQueries;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded by the row that uses it only (no types shipped)
    const autocannon = require('autocannon') as Autocannon;
    const result = await autocannon({
      url,
      method: 'POST',
      headers,
      body: JSON.stringify({ query: IDENTICAL }),
      connections: 10,
      duration: seconds,
    });
    return { rps: result.requests.average, failed: failures(result), queries: (await stats()).dbQueries - before };
  });
}

const PAGE = (name: string) => `query ${name}($n: Int!) { page(n: $n) { id name detail { id text } } }`;

interface Trials {
  rps: number[];
  /** The server's CPU time (user + system) per request of each trial, µs. */
  cpu: number[];
  failed: number;
  queries: number;
}

const cpuMicros = (stats: ServerStats): number => stats.cpu.user + stats.cpu.system;

/** Warms every field the pages hold (every Item.detail), under an operation no trial uses. */
async function warmPages(url: string, pages: number): Promise<void> {
  for (let n = 0; n < pages; n += 10)
    await Promise.all(Array.from({ length: Math.min(10, pages - n) }, (_, i) => post(url, PAGE('Warm'), { n: n + i })));
}

/**
 * One trial: `pages` distinct pages once each, ten clients over fetch, timed from the first request
 * to the last answer (autocannon's `amount` mode ends on its 1 s sampling tick, which rounds 1,000
 * fast requests to ~1 s for both systems). One operation, as an app's page query is, its pages
 * numbered from `first`: each pass asks pages no pass asked before, so every request is a page the
 * response layer has not seen (its items' details are warm: n × 37 + i modulo the pool).
 */
async function pagesTrial(
  url: string,
  stats: () => Promise<ServerStats>,
  first: number,
  pages: number,
  trials: Trials,
): Promise<void> {
  const query = PAGE('Page');
  const cpuBefore = cpuMicros(await stats());
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < pages) {
        const n = next++;
        await post(url, query, { n: first + n }).catch(() => trials.failed++);
      }
    }),
  );
  trials.rps.push(pages / (Number(process.hrtime.bigint() - started) / 1e9));
  trials.cpu.push((cpuMicros(await stats()) - cpuBefore) / pages);
}

/**
 * (b) both systems up at once, each warmed, then their trials interleaved (A B, B A, …) so a
 * slower moment of the shared machine does not land on one system only.
 */
async function variedPages(
  pages: number,
  trials: number,
  warmPasses: number,
): Promise<{ both: Trials; fields: Trials }> {
  return withServer('apollo-herd-response', (bothUrl, bothStats) =>
    withServer('apollo-herd-fields', async (fieldsUrl, fieldsStats) => {
      await warmPages(bothUrl, pages);
      await warmPages(fieldsUrl, pages);
      // Then trial-shaped passes, not counted, until the JIT is steady: a server's CPU per request
      // falls by half over its first few thousand requests, and a median over that warm-up is not
      // the steady state (the response layer's store fills meanwhile, as a server's does). Both fall
      // for longer than 4,000 requests, the layer's (more code to compile) most: in 20 trials after
      // 4 such passes, 492, 347, 314, 293 µs in its first four, ~262 in its last six; the fields
      // alone 364, 285, 265, 266 and ~246. Ten passes, then.
      for (let pass = 0; pass < warmPasses; pass++)
        for (const [url, stats] of [
          [bothUrl, bothStats],
          [fieldsUrl, fieldsStats],
        ] as const) {
          const warm: Trials = { rps: [], cpu: [], failed: 0, queries: 0 };
          await pagesTrial(url, stats, (1 + pass) * pages, pages, warm);
          if (warm.failed > 0) throw new Error(`${warm.failed} requests of a warm-up pass failed (${url})`);
        }
      const both: Trials = { rps: [], cpu: [], failed: 0, queries: -(await bothStats()).dbQueries };
      const fields: Trials = { rps: [], cpu: [], failed: 0, queries: -(await fieldsStats()).dbQueries };
      for (let trial = 0; trial < trials; trial++) {
        const order: [string, () => Promise<ServerStats>, Trials][] = [
          [bothUrl, bothStats, both],
          [fieldsUrl, fieldsStats, fields],
        ];
        if (trial % 2 === 1) order.reverse();
        for (const [url, stats, into] of order)
          await pagesTrial(url, stats, (1 + warmPasses + trial) * pages, pages, into);
      }
      both.queries += (await bothStats()).dbQueries;
      fields.queries += (await fieldsStats()).dbQueries;
      return { both, fields };
    }),
  );
}

/** (c) `n` concurrent cold identical queries: executions of the operation. */
async function coldExecutions(mode: ResponseMode, n: number): Promise<number> {
  return withServer(mode, async (url, stats) => {
    const bodies = await Promise.all(Array.from({ length: n }, () => post(url, COLD)));
    for (const body of bodies) if (body.data.items.length !== 100) throw new Error('unexpected items');
    return (await stats()).executions;
  });
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function responseCaches(o: ResponseCacheOptions): Promise<Row> {
  const title = '9. Whole-response cache over HTTP';
  const pages = o.quick ? 100 : 1_000;
  const measureText = `(a) identical query req/s vs Apollo's response cache · (b) ${count(pages)} varied pages req/s, response layer + fields vs fields alone · (c) executions for 100 concurrent cold identical queries`;
  for (const peer of [
    '@apollo/server-plugin-response-cache',
    '@envelop/response-cache',
    'graphql-yoga',
    'autocannon',
  ]) {
    try {
      require.resolve(peer);
    } catch {
      return skippedRow(title, measureText, `${peer} is not installed`);
    }
  }
  const seconds = o.quick ? 1 : 5;
  // (a), interleaved (A B, B A, A B) so a slower moment of the shared machine does not land on one
  // system only: two runs each gave 0.97× in one full run and 1.48–1.79× alone.
  const herdA = [];
  const peerA = [];
  for (let i = 0; i < (o.quick ? 1 : 3); i++) {
    const herdFirst = i % 2 === 0;
    if (herdFirst) herdA.push(await identical('apollo-herd-response', seconds));
    peerA.push(await identical('apollo-peer', seconds));
    if (!herdFirst) herdA.push(await identical('apollo-herd-response', seconds));
  }
  const herdRps = Math.max(...herdA.map((x) => x.rps));
  const peerRps = Math.max(...peerA.map((x) => x.rps));
  // (b)
  const warmPasses = o.quick ? 0 : 10;
  const { both, fields } = await variedPages(pages, o.quick ? 1 : 8, warmPasses);
  const bothRps = median(both.rps);
  const fieldsRps = median(fields.rps);
  const bothCpu = median(both.cpu);
  const fieldsCpu = median(fields.cpu);
  // (c)
  const cold = 100;
  const executions = {
    apolloHerd: await coldExecutions('apollo-herd-response', cold),
    apolloPeer: await coldExecutions('apollo-peer', cold),
    yogaHerd: await coldExecutions('yoga-herd-response', cold),
    yogaPeer: await coldExecutions('yoga-peer', cold),
  };
  const failed = [...herdA, ...peerA].reduce((sum, x) => sum + x.failed, 0) + both.failed + fields.failed;
  const identicalRatio = herdRps / peerRps;
  const pagesRatio = bothRps / fieldsRps;
  // The same cost as the servers see it: CPU per request, fields alone over layer + fields (steadier
  // than req/s on a shared machine, where the load generator competes for the same cores).
  const cpuRatio = fieldsCpu / bothCpu;
  return {
    workload: title,
    measure: measureText,
    cells: {
      herdcache: `(a) ${count(Math.round(herdRps))} req/s · (b) ${count(Math.round(bothRps))} req/s (fields alone ${count(Math.round(fieldsRps))}) · (c) ${executions.apolloHerd} execution on Apollo, ${executions.yogaHerd} on Yoga`,
      responseCaches: `(a) Apollo's: ${count(Math.round(peerRps))} req/s · (c) Apollo's: ${executions.apolloPeer} executions, Envelop's (Yoga): ${executions.yogaPeer}`,
    },
    ratio: `(a) req/s ${ratio(identicalRatio)} Apollo's response cache (target ≥ 1.0×)<br>(b) req/s ${ratio(pagesRatio)} fields alone (target ≥ 0.95×); server CPU per request: ${ratio(cpuRatio)}<br>(c) executions ${executions.apolloHerd} / ${executions.apolloPeer} (Apollo), ${executions.yogaHerd} / ${executions.yogaPeer} (Yoga)`,
    notes: [
      `Servers in child processes (NODE_ENV=production), load from the bench process over HTTP on 127.0.0.1. Schema: \`items: [Item!]!\` (100 items, one 10 ms database read, counted as the operation's executions) and \`page(n: Int!)\` (20 items built in memory), \`Item.detail\` a 10 ms database read; @cacheControl(maxAge: 3600) on the root fields and types, the peers' policy source; herdcache's modes add \`@cached(ttl: 3600)\` on Item.detail (an hour: a loaded machine's trials outlast a minute, and an expired field would be a database read in the middle of them).`,
      `(a) \`${IDENTICAL}\`, 3 checked requests first (they fill the caches), then autocannon, 10 connections, ${seconds} s, best of ${herdA.length} runs per system, interleaved (A B, B A, …): herdcachePlugin({ cache, responseCache: true }) ${herdA.map((x) => count(Math.round(x.rps))).join(' / ')} req/s vs ApolloServerPluginResponseCache() ${peerA.map((x) => count(Math.round(x.rps))).join(' / ')} req/s (database reads during the runs: herdcache ${herdA.reduce((s, x) => s + x.queries, 0)}, Apollo's ${peerA.reduce((s, x) => s + x.queries, 0)}). Target ≥ 1.0×: ${identicalRatio >= 1 ? 'met' : 'missed'} (${ratio(identicalRatio)}).`,
      `(b) one operation, \`${PAGE('Page')}\`, as an app's page query is: each pass (warm-up or trial) asks ${count(pages)} pages no pass asked before (n from (pass + 1) × ${count(pages)}), each once, so every request is a response-layer miss and the layer's admission is in its steady state for an operation whose pages are asked once (its misses run solo: not stored, no flight; docs/operations.md); every Item.detail warm from a warm-up under another name${warmPasses > 0 ? `, then ${warmPasses} trial-shaped passes per server not counted, so the JIT is steady` : ''}), 10 fetch clients; both servers up at once, trials interleaved (A B, B A, …); req/s = requests / time from the first request to the last answer, median of ${both.rps.length} trial(s): response layer + fields ${both.rps.map((x) => count(Math.round(x))).join(' / ')} vs herdcachePlugin({ cache }) with the same @cached fields ${fields.rps.map((x) => count(Math.round(x))).join(' / ')} (database reads during the trials: ${both.queries} and ${fields.queries}). Target ≥ 0.95×: ${pagesRatio >= 0.95 ? 'met' : 'missed'} (${ratio(pagesRatio)}). Server CPU time (user + system, process.cpuUsage in each server) per request, per trial: layer + fields ${both.cpu.map((x) => count(Math.round(x))).join(' / ')} µs vs fields alone ${fields.cpu.map((x) => count(Math.round(x))).join(' / ')} µs, medians ${count(Math.round(bothCpu))} vs ${count(Math.round(fieldsCpu))} µs: ${ratio(cpuRatio)} (fields alone's CPU per request over the layer's).`,
      `(c) ${cold} concurrent \`${COLD}\` to a fresh server, executions = calls of the root resolver: herdcache ${executions.apolloHerd} (Apollo 5) and ${executions.yogaHerd} (Yoga 5, useHerdcache); @apollo/server-plugin-response-cache 5: ${executions.apolloPeer}; @envelop/response-cache 9 (useResponseCache({ session: () => null, ttl: 3_600_000 }) on Yoga 5): ${executions.yogaPeer}.`,
      ...(failed > 0 ? [`${failed} requests failed during the load runs.`] : []),
    ],
  };
}

/**
 * Workload 6, GraphQL end to end: an Apollo server whose query returns 100 items, each with a
 * child field on a 10 ms database, loaded over real HTTP on 127.0.0.1 by autocannon (as a
 * library, in this process; the server is a child process) → req/s and p99, for the field
 * uncached, batched by a DataLoader per operation, and under herdcache's @cached (warm).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { skippedRow, type Row, type SystemId } from '../lib/report';
import { count, ms, ratio, sleep } from '../lib/stats';
import { ITEMS, loadGraphqlPieces, type GraphqlMode } from './graphql-server';

export interface GraphqlOptions {
  readonly quick: boolean;
}

/** The part of autocannon's result this row reads (the package ships no types). */
interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;

const QUERY = JSON.stringify({ query: '{ items { id name detail { id text } } }' });

function message<T>(child: ChildProcess): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`the GraphQL server exited with code ${code}`));
    child.once('exit', onExit);
    child.once('message', (m) => {
      child.off('exit', onExit);
      const error = (m as { error?: string }).error;
      if (error !== undefined) reject(new Error(error));
      else resolve(m as T);
    });
  });
}

async function post(url: string): Promise<void> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: QUERY });
  const body = (await response.json()) as { data?: { items?: { detail?: { text?: string } }[] }; errors?: unknown };
  const items = body.data?.items;
  if (
    !response.ok ||
    body.errors !== undefined ||
    items?.length !== ITEMS ||
    typeof items[ITEMS - 1]?.detail?.text !== 'string'
  ) {
    throw new Error(`unexpected GraphQL response: ${JSON.stringify(body).slice(0, 300)}`);
  }
}

interface Outcome {
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly requests: number;
  readonly queriesPerRequest: number;
  readonly failures: number;
  readonly plugin: boolean;
}

async function measure(mode: GraphqlMode, seconds: number, warmups: number): Promise<Outcome> {
  const child = fork(join(__dirname, 'graphql-server.ts'), [], {
    env: { ...process.env, HERDCACHE_BENCH_MODE: mode, NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  try {
    const { url, plugin } = await message<{ url: string; plugin: boolean }>(child);
    for (let i = 0; i < warmups; i++) await post(url); // checks the answer, fills the cache, warms the JIT
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded by the rows that use it only
    const autocannon = require('autocannon') as Autocannon;
    const result = await autocannon({
      url,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: QUERY,
      connections: 10,
      duration: seconds,
    });
    // Queries per request from one probe once the run has drained: counting over the run would
    // charge the queries of requests still in flight when autocannon stopped.
    await sleep(200);
    const before = (await askStats(child)).queries;
    await post(url);
    const queries = (await askStats(child)).queries - before;
    return {
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      requests: result.requests.total,
      queriesPerRequest: queries,
      failures: result.errors + result.timeouts + result.non2xx,
      plugin,
    };
  } finally {
    if (child.connected) child.disconnect();
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  }
}

function askStats(child: ChildProcess): Promise<{ queries: number }> {
  const reply = message<{ queries: number }>(child);
  child.send('stats');
  return reply;
}

function cell(x: Outcome): string {
  const q = x.queriesPerRequest;
  return `${count(Math.round(x.rps))} req/s · p50 ${ms(x.p50)} / p99 ${ms(x.p99)} · ${q.toFixed(Number.isInteger(q) ? 0 : 2)} db queries/req${x.failures > 0 ? ` · ${x.failures} failed` : ''}`;
}

export async function graphqlEndToEnd(o: GraphqlOptions): Promise<Row> {
  const title = '6. GraphQL end to end';
  const measureText = `Apollo server, ${ITEMS} items × child field on a 10 ms database (pool of 10), autocannon 10 connections over HTTP → req/s · p50 / p99 · db queries per request`;
  const pieces = loadGraphqlPieces();
  if (typeof pieces === 'string') return skippedRow(title, measureText, pieces);
  const seconds = o.quick ? 2 : 6;
  const modes: [SystemId, GraphqlMode][] = [
    ['noCache', 'uncached'],
    ['dataloaderPerRequest', 'dataloader'],
    ['herdcache', 'cached'],
  ];
  const outcomes = new Map<SystemId, Outcome>();
  for (const [id, mode] of modes) outcomes.set(id, await measure(mode, seconds, 3));
  const herd = outcomes.get('herdcache')!;
  const uncached = outcomes.get('noCache')!;
  const dl = outcomes.get('dataloaderPerRequest')!;
  const cells: Row['cells'] = {
    dataloaderShared: 'n/a (one loader shared by all operations is a cache without expiry)',
    asyncCacheDedupe: 'n/a (no GraphQL integration measured)',
    bentocache: 'n/a (no GraphQL integration measured)',
  };
  for (const [id, x] of outcomes) cells[id] = cell(x);
  const vsUncached = herd.rps / uncached.rps;
  return {
    workload: title,
    measure: measureText,
    cells,
    ratio: `req/s ${ratio(vsUncached)} uncached (target ≥ 10×)<br>req/s ${ratio(herd.rps / dl.rps)} DataLoader per request`,
    notes: [
      `The server runs in a child process; autocannon (10 connections, ${seconds} s per mode) in the bench process. 3 checked requests first (answers verified; they also warm the cache). The list itself is static: only Item.detail reaches the database.`,
      'Database queries per request: counted over one probe request after the run (warm).',
      "Database model: 10 ms per query, at most 10 queries at once (a connection pool, node-postgres' default size); queries beyond that queue. Uncached: 100 queries per request; DataLoader per operation: 1 query per request (a batch); @cached(ttl: 60): warm, no queries.",
      `herdcache: cachedDirectiveTransformer(schema, { cache }) on \`detail: Detail! @cached(ttl: 60)\`, context herdcacheContext({ cache }) per operation, ${herd.plugin ? 'herdcachePlugin({ cache, extensions: false })' : 'no Apollo plugin (src/apollo not there yet)'}; the in-memory store.`,
      ...modes.map(
        ([id, mode]) => `${mode}: ${cell(outcomes.get(id)!)} (${count(outcomes.get(id)!.requests)} requests)`,
      ),
      `Target: cached ≥ 10× uncached req/s: ${vsUncached >= 10 ? 'met' : 'missed'} (${ratio(vsUncached)}).`,
    ],
  };
}

/**
 * npm run demo: a cache stampede, absorbed.
 *
 * 5,000 concurrent requests ask for 5 hot users from a database that takes 30 ms per call.
 * Without a cache every request is a database call. With herdcache the misses of all the
 * concurrent requests share one fill per key (single-flight), or one batch call for all keys
 * (a loader through request scopes, as GraphQL resolvers use it). After the TTL, with `swr`
 * set, every request is answered at once with the stale value while one background refresh
 * runs: nobody waits.
 *
 * Time is a manual clock: the demo moves it past the TTL instead of sleeping.
 *
 * Then the same stampede as GraphQL queries over HTTP: an Apollo Server on 127.0.0.1 (a free
 * port), first with a plain schema, then with the field marked @cached, its hits and coalescing
 * read from each response's `extensions.cache`.
 *
 * Across processes (Redis):  npm run demo -- --redis redis://127.0.0.1:6379 --replicas 4
 * (or REDIS_URL=...) runs the same stampede in N child processes sharing one Redis, and prints
 * the database calls fleet-wide: without a cache, with herdcache's process-local single-flight
 * only (`lock: false`), and with its Redis fill lock.
 */
import { fork } from 'node:child_process';
import { Agent, request as httpRequest } from 'node:http';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSchema, type GraphQLObjectType } from 'graphql';
import { burst, sleep } from '../bench/lib/stats';
import { createCache, manualClock, type Cache, type Counters } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
import {
  type CacheReport,
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  herdcacheContext,
} from 'herdcache/graphql';
import { redisStore } from 'herdcache/redis';

const REQUESTS = 5_000;
const HOT_KEYS = 5;
const DB_MS = 30;
const TTL_MS = 60_000;
const SWR_MS = 5 * 60_000;

interface User {
  readonly id: string;
  readonly name: string;
}

/** A database that takes DB_MS per call, one user or many, and counts its calls. */
class SlowDatabase {
  calls = 0;
  rows = 0;

  async user(id: string): Promise<User> {
    this.calls++;
    this.rows++;
    await sleep(DB_MS);
    return { id, name: `user ${id}` };
  }

  async users(ids: readonly string[]): Promise<User[]> {
    this.calls++;
    this.rows += ids.length;
    await sleep(DB_MS);
    return ids.map((id) => ({ id, name: `user ${id}` }));
  }
}

/** Request i asks for one of the hot users. */
function hotKey(i: number): string {
  return String(i % HOT_KEYS);
}

/** Starts `n` requests at once; resolves with each one's latency in ms (the bench's burst). */
const stampede = burst;

/** Waits for background refreshes to land, so their database calls are counted. */
async function settled(cache: Cache): Promise<void> {
  for (let i = 0; i < 200 && cache.inFlight > 0; i++) await sleep(5);
}

// ── the table ─────────────────────────────────────────────────────────────────────────────

interface Row {
  scenario: string;
  requests: number;
  dbCalls: string;
  hits: number | string;
  coalesced: number | string;
  stale: number | string;
  p50: string;
  p99: string;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

function ms(value: number): string {
  return value >= 10 ? `${value.toFixed(0)} ms` : value >= 1 ? `${value.toFixed(1)} ms` : `${value.toFixed(2)} ms`;
}

function calls(db: { calls: number; rows: number }, before = { calls: 0, rows: 0 }): string {
  const c = db.calls - before.calls;
  const r = db.rows - before.rows;
  return c === r ? String(c) : `${c} (${r} rows)`;
}

function delta(after: Counters, before: Counters): Counters {
  const out = { ...after };
  for (const name of Object.keys(out) as (keyof Counters)[]) out[name] -= before[name];
  return out;
}

function row(
  scenario: string,
  latencies: number[],
  dbCalls: string,
  counters?: Pick<Counters, 'hits' | 'coalesced' | 'staleServed'>,
): Row {
  return {
    scenario,
    requests: latencies.length,
    dbCalls,
    hits: counters?.hits ?? '-',
    coalesced: counters?.coalesced ?? '-',
    stale: counters?.staleServed ?? '-',
    p50: ms(percentile(latencies, 50)),
    p99: ms(percentile(latencies, 99)),
  };
}

const COLUMNS = {
  scenario: 'scenario',
  requests: 'requests',
  dbCalls: 'database calls',
  hits: 'hits',
  coalesced: 'coalesced',
  stale: 'stale served',
  p50: 'p50',
  p99: 'p99',
} as const;

function printTable(
  title: string,
  rows: Row[],
  columns: readonly (keyof Row)[] = Object.keys(COLUMNS) as (keyof Row)[],
): void {
  const head = columns.map((c) => COLUMNS[c]);
  const body = rows.map((r) => columns.map((c) => String(r[c])));
  const widths = head.map((h, c) => Math.max(h.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: string[]) =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  console.log(`\n${title}\n`);
  console.log(line(head));
  console.log(widths.map((w) => '─'.repeat(w)).join('  '));
  for (const b of body) console.log(line(b));
}

// ── one process, the in-memory default ────────────────────────────────────────────────────

/** Runs every path once on throwaway caches, so the table shows steady state, not JIT compilation. */
async function warmUp(): Promise<void> {
  const db = new SlowDatabase();
  const cache = createCache({ ttl: TTL_MS, swr: SWR_MS });
  const users = cache.loader({ name: 'user', batch: (ids: readonly string[]) => db.users(ids) });
  for (let round = 0; round < 2; round++) {
    await stampede(REQUESTS, (i) => db.user(hotKey(i)));
    await stampede(REQUESTS, (i) => cache.getOrCompute(`user:${hotKey(i)}:${round}`, () => db.user(hotKey(i))));
    await stampede(REQUESTS, (i) => cache.request().load(users, `${hotKey(i)}:${round}`));
  }
}

async function inMemory(): Promise<void> {
  await warmUp();
  const clock = manualClock();
  const rows: Row[] = [];

  // 1. No cache: every request is a database call.
  {
    const db = new SlowDatabase();
    const latencies = await stampede(REQUESTS, (i) => db.user(hotKey(i)));
    rows.push(row('no cache', latencies, calls(db)));
  }

  // 2. getOrCompute: one fill per key, every other caller joins it.
  const db = new SlowDatabase();
  const plain = createCache({ ttl: TTL_MS, clock });
  {
    const before = plain.metrics().total;
    const latencies = await stampede(REQUESTS, (i) => {
      const id = hotKey(i);
      return plain.getOrCompute(`user:${id}`, () => db.user(id));
    });
    rows.push(row('herdcache getOrCompute, cold', latencies, calls(db), delta(plain.metrics().total, before)));
  }

  // 3. A batching loader through request scopes (one scope per request, as per GraphQL
  //    operation): the keys missed in one tick by all requests leave in one batch call.
  const swrDb = new SlowDatabase();
  const cache = createCache({ ttl: TTL_MS, swr: SWR_MS, clock });
  const users = cache.loader({ name: 'user', batch: (ids: readonly string[]) => swrDb.users(ids) });
  const viaScopes = () => stampede(REQUESTS, (i) => cache.request().load(users, hotKey(i)));
  {
    const before = cache.metrics().total;
    const latencies = await viaScopes();
    rows.push(
      row('herdcache loader + request scopes, cold', latencies, calls(swrDb), delta(cache.metrics().total, before)),
    );
  }
  {
    const before = cache.metrics().total;
    const dbBefore = { ...swrDb };
    const latencies = await viaScopes();
    rows.push(
      row(
        'herdcache loader + request scopes, warm',
        latencies,
        calls(swrDb, dbBefore),
        delta(cache.metrics().total, before),
      ),
    );
  }

  clock.advance(TTL_MS + 1);

  // 4. Past the TTL without swr: the key is a miss again; everyone waits on one refill per key.
  {
    const before = plain.metrics().total;
    const dbBefore = { ...db };
    const latencies = await stampede(REQUESTS, (i) => {
      const id = hotKey(i);
      return plain.getOrCompute(`user:${id}`, () => db.user(id));
    });
    rows.push(
      row('getOrCompute, TTL expired, no swr', latencies, calls(db, dbBefore), delta(plain.metrics().total, before)),
    );
  }

  // 5. Past the TTL with swr: the stale value is served at once; one background refresh.
  {
    const before = cache.metrics().total;
    const dbBefore = { ...swrDb };
    const latencies = await viaScopes();
    await settled(cache);
    rows.push(
      row('loader + scopes, TTL expired, swr', latencies, calls(swrDb, dbBefore), delta(cache.metrics().total, before)),
    );
  }

  printTable(
    `herdcache demo: ${REQUESTS.toLocaleString('en-US')} concurrent requests for ${HOT_KEYS} hot keys, database ${DB_MS} ms per call (in-memory store)`,
    rows,
  );
  console.log(`
  database calls: calls to the simulated database (a loader's batch call counts once; rows in brackets).
  coalesced: requests that joined a fill already in flight instead of starting their own.
  stale served: requests answered at once with the previous value while one background refresh ran.
  latency: from a request's start to its answer. All requests start in one synchronous burst,
  so a request also waits for the burst to be issued (that is most of the "warm" latency).
  Time past the TTL was moved with manualClock(), not slept.`);
}

// ── GraphQL over HTTP ────────────────────────────────────────────────────────────────────

/**
 * Connections the client keeps open to the server. Bounded on purpose: 5,000 sockets opened at
 * once would measure the kernel's accept queue, not the cache (and the global fetch cannot be
 * bounded without undici's Agent, which is not a dependency). The server still sees a stampede:
 * up to this many queries at once.
 */
const HTTP_CONNECTIONS = 64;

const GRAPHQL_SDL = /* GraphQL */ `
  type Query { user(id: ID!): User @cached(ttl: ${TTL_MS / 1000}) }
  type User { id: ID!, name: String! }
`;
const USER_QUERY = 'query User($id: ID!) { user(id: $id) { id name } }';

interface GraphQLAnswer {
  data?: { user?: User | null };
  errors?: unknown[];
  extensions?: { cache?: CacheReport };
}

/** An Apollo Server on 127.0.0.1 (a free port) over `db`: the user field @cached or not. */
async function startGraphQL(db: SlowDatabase, cached: boolean): Promise<{ url: URL; stop: () => Promise<void> }> {
  const schema = buildSchema(
    `${cachedDirectiveTypeDefs}\n${cached ? GRAPHQL_SDL : GRAPHQL_SDL.replace(/@cached\([^)]*\)/, '')}`,
  );
  (schema.getType('Query') as GraphQLObjectType).getFields().user!.resolve = (_parent, { id }: { id: string }) =>
    db.user(id);
  const cache = createCache();
  if (cached) cachedDirectiveTransformer(schema, { cache });
  const server = new ApolloServer({ schema, plugins: cached ? [herdcachePlugin({ cache, extensions: true })] : [] });
  const { url } = await startStandaloneServer(server, {
    listen: { host: '127.0.0.1', port: 0 },
    context: async () => (cached ? herdcacheContext({ cache }) : {}),
  });
  return { url: new URL(url), stop: () => server.stop() };
}

/**
 * POSTs one query over a keep-alive connection of `agent`; fails on anything but a clean answer.
 * `sent` is when the query got its connection and left: the time it waited for a free connection
 * is the client's queue, not the server's latency.
 */
function postQuery(agent: Agent, url: URL, id: string): Promise<GraphQLAnswer & { sent: number }> {
  const body = JSON.stringify({ query: USER_QUERY, variables: { id } });
  return new Promise((resolve, reject) => {
    let sent = NaN;
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let answer: GraphQLAnswer | undefined;
          try {
            answer = JSON.parse(text) as GraphQLAnswer;
          } catch {
            // reported below with the body
          }
          if (
            res.statusCode !== 200 ||
            answer === undefined ||
            answer.errors !== undefined ||
            answer.data?.user?.id !== id
          ) {
            reject(new Error(`HTTP ${res.statusCode} for user ${id}: ${text.slice(0, 300)}`));
          } else {
            resolve({ ...answer, sent });
          }
        });
      },
    );
    req.on('error', reject);
    req.on('socket', () => {
      sent = performance.now();
    });
    req.end(body);
  });
}

/** The stampede as GraphQL queries: each request is one HTTP POST for one of the hot users. */
async function graphqlRound(scenario: string, cached: boolean, requests: number, warmUpRequests: number): Promise<Row> {
  const db = new SlowDatabase();
  const { url, stop } = await startGraphQL(db, cached);
  const agent = new Agent({ keepAlive: true, maxSockets: HTTP_CONNECTIONS });
  try {
    // Connections opened and the server's paths compiled, on keys the measured run never asks for.
    await stampede(warmUpRequests, (i) => postQuery(agent, url, `warm-${i % HTTP_CONNECTIONS}`));
    const dbBefore = { ...db };
    const answers: GraphQLAnswer[] = [];
    const latencies: number[] = [];
    await stampede(requests, (i) =>
      postQuery(agent, url, hotKey(i)).then((answer) => {
        latencies.push(performance.now() - answer.sent);
        answers.push(answer);
      }),
    );
    let counters: Pick<Counters, 'hits' | 'coalesced' | 'staleServed'> | undefined;
    if (cached) {
      counters = { hits: 0, coalesced: 0, staleServed: 0 };
      for (const answer of answers) {
        const total = answer.extensions?.cache?.total;
        if (total === undefined) throw new Error('a @cached response has no extensions.cache');
        counters.hits += total.hits;
        counters.coalesced += total.coalesced;
        counters.staleServed += total.staleServed;
      }
    }
    return row(scenario, latencies, calls(db, dbBefore), counters);
  } finally {
    agent.destroy();
    await stop();
  }
}

async function overHttp(): Promise<void> {
  const warmUp = 2 * HTTP_CONNECTIONS;
  const rows = [
    await graphqlRound('GraphQL, no cache', false, REQUESTS, warmUp),
    await graphqlRound(`GraphQL, @cached(ttl: ${TTL_MS / 1000}), cold`, true, REQUESTS, warmUp),
  ];
  printTable(
    `GraphQL over HTTP: ${REQUESTS.toLocaleString('en-US')} concurrent queries for ${HOT_KEYS} hot users, Apollo Server on 127.0.0.1 (${HTTP_CONNECTIONS} keep-alive connections), database ${DB_MS} ms per call`,
    rows,
  );
  console.log(`
  hits, coalesced, stale served: summed from each response's extensions.cache (the herdcache plugin's
  per-operation report). The server sees up to ${HTTP_CONNECTIONS} queries at once: those that arrive while a
  user's first fill runs join it (coalesced); the rest arrive after it has landed (hits).
  latency: from the moment a query has a connection to its parsed answer (the time it queued for a
  free connection is the client's, and is left out). Client and server share this process's CPU.`);
}

// ── several processes sharing one Redis ──────────────────────────────────────────────────

type Mode = 'no cache' | 'local single-flight only' | 'redis fill lock';
const MODES: readonly Mode[] = ['no cache', 'local single-flight only', 'redis fill lock'];

interface ChildResult {
  calls: number;
  rows: number;
  latencies: number[];
  lockContended: number;
}

async function connectRedis(url: string) {
  // Loaded only for the fleet run: the in-memory demo needs no ioredis.
  const { Redis } = await import('ioredis');
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  // Without a listener ioredis prints "Unhandled error event" on every failed reconnect.
  client.on('error', (error) => console.warn('redis:', error.message));
  await client.connect();
  return client;
}

/** One replica: runs the stampede for one mode when the parent says go, reports its counts. */
async function child(): Promise<void> {
  const url = process.env.HERDCACHE_DEMO_REDIS!;
  const client = await connectRedis(url);
  process.on('message', (message: { mode: Mode; prefix: string; requests: number; at: number }) => {
    void (async () => {
      const db = new SlowDatabase();
      let request: (i: number) => Promise<unknown>;
      let cache: Cache | undefined;
      if (message.mode === 'no cache') {
        request = (i) => db.user(hotKey(i));
      } else {
        const store = redisStore({ client, prefix: message.prefix });
        cache = createCache({ store, ttl: TTL_MS, lock: message.mode === 'redis fill lock' });
        const users = cache.loader({ name: 'user', batch: (ids: readonly string[]) => db.users(ids) });
        const c = cache;
        request = (i) => c.request().load(users, hotKey(i));
      }
      // Start together: every replica waits for the same wall-clock instant.
      await sleep(Math.max(0, message.at - Date.now()));
      const latencies = await stampede(message.requests, request);
      const result: ChildResult = {
        calls: db.calls,
        rows: db.rows,
        latencies,
        lockContended: cache?.metrics().total.lockContended ?? 0,
      };
      process.send!(result);
    })().catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
  });
  process.on('disconnect', () => {
    client.disconnect();
  });
  process.send!('ready');
}

async function fleet(url: string, replicas: number): Promise<void> {
  const perReplica = Math.ceil(REQUESTS / replicas);
  const children = Array.from({ length: replicas }, () =>
    fork(__filename, ['--child'], {
      env: { ...process.env, HERDCACHE_DEMO_REDIS: url },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  try {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve, reject) => {
            c.once('message', () => resolve());
            c.once('exit', (code) => reject(new Error(`a replica exited (code ${code}) before it was ready`)));
          }),
      ),
    );
    const rows: Row[] = [];
    const run = `demo:${process.pid}:${Date.now().toString(36)}`;
    for (const mode of MODES) {
      const at = Date.now() + 100;
      const prefix = `${run}:${mode.replace(/\W+/g, '-')}:`;
      const results = await Promise.all(
        children.map(
          (c) =>
            new Promise<ChildResult>((resolve) => {
              c.once('message', (m) => resolve(m as ChildResult));
              c.send({ mode, prefix, requests: perReplica, at });
            }),
        ),
      );
      const total = { calls: 0, rows: 0 };
      for (const r of results) {
        total.calls += r.calls;
        total.rows += r.rows;
      }
      rows.push(
        row(
          mode === 'no cache' ? 'no cache' : `herdcache, ${mode}`,
          results.flatMap((r) => r.latencies),
          calls(total),
        ),
      );
    }
    printTable(
      `fleet: ${replicas} replicas sharing ${url}, ${perReplica.toLocaleString('en-US')} concurrent requests each for ${HOT_KEYS} hot keys (database calls summed fleet-wide)`,
      rows,
      ['scenario', 'requests', 'dbCalls', 'p50', 'p99'],
    );
    console.log(`
  local single-flight only: each replica fills once per batch of keys (lock: false).
  redis fill lock: one replica fills each key; the others wait for its value (woken by its announcement).`);
    const cleanup = await connectRedis(url);
    const stale = await scanKeys(cleanup, `${run}:*`);
    if (stale.length > 0) await cleanup.unlink(...stale);
    cleanup.disconnect();
  } finally {
    for (const c of children) c.disconnect();
  }
}

async function scanKeys(client: Awaited<ReturnType<typeof connectRedis>>, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0');
  return keys;
}

function argument(name: string): string | undefined {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  if (i !== -1) return args[i + 1];
  const inline = args.find((a) => a.startsWith(`${name}=`));
  return inline?.slice(name.length + 1);
}

async function main(): Promise<void> {
  if (process.argv.includes('--child')) return child();
  await inMemory();
  await overHttp();
  const url = argument('--redis') ?? process.env.REDIS_URL;
  const replicasArg = argument('--replicas');
  const replicas = replicasArg === undefined ? 4 : Number(replicasArg);
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 32)
    throw new Error(`--replicas must be an integer in [1, 32], got ${replicasArg}`);
  if (url !== undefined) await fleet(url, replicas);
  else if (replicasArg !== undefined)
    console.log('\n(--replicas needs a Redis: pass --redis redis://127.0.0.1:6379 or set REDIS_URL)');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

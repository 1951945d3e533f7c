// The response layer as a newcomer meets it: run by scripts/newcomer.sh from a temp project where
// the packed tarball is installed (never this checkout's src), against real Apollo 5 and Yoga 5
// servers over HTTP on 127.0.0.1 and a real redis-server (REDIS_URL). Counts what matters:
// executions, stale reads, leaks. Bounded: a fixed number of requests, a watchdog of 120 s.
import { createServer } from 'node:http';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSchema } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { Redis } from 'ioredis';
import { createCache } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
import { useHerdcache } from 'herdcache/envelop';
import { redisStore } from 'herdcache/redis';

const watchdog = setTimeout(() => {
  console.error('newcomer: not done after 120 s (a request or a load never settled)');
  process.exit(1);
}, 120_000);

const SDL = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Item @cacheControl(maxAge: 600) { id: ID! name: String! }
  type Viewer @cacheControl(maxAge: 600, scope: PRIVATE) { id: ID! }
  type Query {
    items: [Item!]! @cacheControl(maxAge: 600)
    item(id: ID!): Item @cacheControl(maxAge: 600)
    me: Viewer
  }
  type Mutation { rename(id: ID!, name: String!): Item }
`;

/** One application: its schema over a shared "database", counting the executions of `items`. */
function application(db) {
  const schema = buildSchema(SDL);
  const stats = { executions: 0 };
  const query = schema.getQueryType().getFields();
  query.items.resolve = async () => {
    stats.executions++;
    await new Promise((resolve) => setTimeout(resolve, 30));
    return [...db.values()].map((item) => ({ ...item }));
  };
  query.item.resolve = (_root, { id }) => (db.has(id) ? { ...db.get(id) } : null);
  query.me.resolve = (_root, _args, context) => (context.session === undefined ? null : { id: context.session });
  schema.getMutationType().getFields().rename.resolve = (_root, { id, name }) => {
    db.set(id, { id, name });
    return { id, name };
  };
  return { schema, stats };
}

const sessionOf = (headers) => {
  const value = typeof headers.get === 'function' ? headers.get('x-session') : headers['x-session'];
  return value === null || value === undefined ? undefined : String(value);
};

async function apollo(cache, db) {
  const { schema, stats } = application(db);
  const server = new ApolloServer({
    schema,
    plugins: [herdcachePlugin({ cache, extensions: true, responseCache: { sessionId: (context) => context.session } })],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) => ({ session: sessionOf(req.headers) }),
  });
  return { url, stats, stop: () => server.stop() };
}

async function yoga(cache, db) {
  const { schema, stats } = application(db);
  const app = createYoga({
    schema,
    logging: false,
    context: ({ request }) => ({ session: sessionOf(request.headers) }),
    plugins: [useHerdcache({ cache, extensions: true, responseCache: { sessionId: (context) => context.session } })],
  });
  const server = createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/graphql`;
  const stop = () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  return { url, stats, stop };
}

async function post(url, query, variables, session) {
  const headers = { 'content-type': 'application/json' };
  if (session !== undefined) headers['x-session'] = session;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const body = await response.json();
  if (body.errors !== undefined) throw new Error(`${url}: ${JSON.stringify(body.errors)}`);
  const outcome = body.extensions?.cache?.response;
  if (outcome !== undefined) outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  return body.data;
}

const results = [];
/** extensions.cache.response of the answers since the last reset: a check that cached nothing proves nothing. */
const outcomes = new Map();
function check(name, ok, detail) {
  results.push(ok);
  console.log(`${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}`);
}

/** A deterministic generator (xorshift), so a failure reproduces. */
function random(seed) {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const freshDb = () => new Map(Array.from({ length: 20 }, (_, i) => [String(i), { id: String(i), name: `item ${i}` }]));
const ITEMS = '{ items { id name } }';

async function main() {
  const redisUrl = process.env.REDIS_URL;
  if (redisUrl === undefined) throw new Error('REDIS_URL is not set (scripts/newcomer.sh starts a redis-server)');

  // 1. One server, memory store: 100 concurrent cold identical queries → 1 execution (Apollo, Yoga).
  for (const [name, start] of [
    ['Apollo', apollo],
    ['Yoga', yoga],
  ]) {
    const cache = createCache();
    const server = await start(cache, freshDb());
    try {
      const answers = await Promise.all(Array.from({ length: 100 }, () => post(server.url, ITEMS)));
      const complete = answers.every((data) => data.items.length === 20);
      check(
        `${name}: 100 cold identical queries`,
        complete && server.stats.executions === 1,
        `${server.stats.executions} execution(s)`,
      );
    } finally {
      await server.stop();
      await cache.close();
    }
  }

  // 2. Two servers on one Redis (redisStore({ client }) as the README writes it): 200 cold
  // identical queries split over both → 1 execution; then read-after-write through a mutation's
  // result entity, on both servers, every read fresh.
  const clients = [new Redis(redisUrl), new Redis(redisUrl)];
  const prefix = `newcomer:${process.pid}:`;
  const caches = clients.map((client) => createCache({ ttl: 600_000, store: redisStore({ client, prefix }) }));
  const db = freshDb();
  const servers = [await apollo(caches[0], db), await yoga(caches[1], db)];
  try {
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => post(servers[i % 2].url, ITEMS)));
    const executions = servers[0].stats.executions + servers[1].stats.executions;
    const complete = answers.every((data) => data.items.length === 20);
    check(
      'Apollo + Yoga on one Redis: 200 cold identical queries',
      complete && executions === 1,
      `${executions} execution(s) in all`,
    );

    let stale = 0;
    let reads = 0;
    for (let round = 0; round < 10; round++) {
      const id = String(round % 20);
      const name = `renamed ${round}`;
      await post(
        servers[round % 2].url,
        'mutation($id: ID!, $name: String!) { rename(id: $id, name: $name) { id name } }',
        { id, name },
      );
      for (const server of servers) {
        const item = (await post(server.url, 'query($id: ID!) { item(id: $id) { id name } }', { id })).item;
        const listed = (await post(server.url, ITEMS)).items.find((entry) => entry.id === id);
        reads += 2;
        if (item.name !== name) stale++;
        if (listed.name !== name) stale++;
      }
    }
    check(
      'read after a mutation (its result entity), on both servers',
      stale === 0,
      `${stale} stale of ${reads} reads`,
    );

    // 3. PRIVATE: 2,000 randomized requests over 8 sessions, 50 at a time (joiners included),
    // some anonymous: each answer is its own session's (a PRIVATE answer never crosses sessions).
    outcomes.clear();
    const next = random(2026);
    let leaks = 0;
    let answered = 0;
    for (let batch = 0; batch < 40; batch++) {
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          const pick = Math.floor(next() * 9);
          const session = pick === 8 ? undefined : `session-${pick}`;
          const server = servers[Math.floor(next() * 2)];
          const data = await post(server.url, '{ me { id } }', undefined, session);
          answered++;
          if ((data.me?.id ?? undefined) !== session) leaks++;
        }),
      );
    }
    const shared = (outcomes.get('hit') ?? 0) + (outcomes.get('coalesced') ?? 0);
    const seen = [...outcomes].map(([outcome, n]) => `${outcome} ${n}`).join(', ');
    check(
      'PRIVATE: 2,000 randomized requests over 8 sessions',
      leaks === 0 && answered === 2_000 && shared > 1_000,
      `${leaks} leak(s), ${answered} answered (${seen})`,
    );
  } finally {
    for (const server of servers) await server.stop();
    for (const cache of caches) await cache.close();
    for (const client of clients) client.disconnect();
  }
}

main()
  .then(() => {
    clearTimeout(watchdog);
    const failed = results.filter((ok) => !ok).length;
    console.log(
      failed === 0
        ? `newcomer: all ${results.length} checks pass`
        : `newcomer: ${failed} of ${results.length} checks FAILED`,
    );
    process.exit(failed === 0 ? 0 : 1);
  })
  .catch((error) => {
    console.error('newcomer:', error);
    process.exit(1);
  });

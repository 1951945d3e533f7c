/**
 * A runnable Apollo Server on herdcache: the @cached directive, loaders in context, the plugin
 * (per-operation report), Prometheus metrics of the cache and its store, and, with Apollo's
 * cache-control, `cache-control` headers that never outlive @cached values.
 *
 *   npx tsx examples/server.ts                      # in-memory cache
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/server.ts   # shared through Redis (fill lock across replicas)
 *
 * GraphQL on http://127.0.0.1:$PORT/ (default 4000), metrics on http://127.0.0.1:$METRICS_PORT/metrics
 * (default 9464). HOST changes the interface (default 127.0.0.1). Try:
 *
 *   curl -s localhost:4000/ -H 'content-type: application/json' -H 'x-user: alice' \
 *     -d '{"query":"query Home { books { title rating author { name } } me { name recommendations { title } } }"}'
 *
 * and look at `extensions.cache` in the response, then at /metrics.
 */
import { createServer } from 'node:http';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSchema, type GraphQLObjectType } from 'graphql';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { createCache, type Store } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
import {
  type HerdcacheContext,
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  herdcacheContext,
} from 'herdcache/graphql';
import { herdcacheMetrics } from 'herdcache/prometheus';

const typeDefs = /* GraphQL */ `
  # Apollo's cache-control directive: @cached caps it (maxAge at most the ttl; PRIVATE stays private).
  enum CacheControlScope {
    PUBLIC
    PRIVATE
  }
  directive @cacheControl(
    maxAge: Int
    scope: CacheControlScope
    inheritMaxAge: Boolean
  ) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION

  type Query {
    "Every book: cached 10 s, then served stale for up to 60 s while one refresh runs (header: max-age=10)."
    books: [Book!]! @cached(ttl: 10, swr: 60) @cacheControl(maxAge: 60)
    book(id: ID!): Book @cached(ttl: 30)
    "Per viewer (x-user header): never shared across users, not cached without one."
    me: Viewer @cached(ttl: 60, scope: PRIVATE) @cacheControl(maxAge: 60)
  }
  type Book {
    id: ID!
    title: String!
    author: Author!
    "Keyed by the parent's id: one store read for all the books of a list."
    rating: Float! @cached(ttl: 60)
  }
  type Author {
    id: ID!
    name: String!
  }
  type Viewer {
    name: String!
    recommendations: [Book!]!
  }
`;

interface BookRow {
  id: string;
  title: string;
  authorId: string;
}

/** A slow backend (40 ms a call), so stampedes and their absorption show. */
const backend = {
  calls: 0,
  async call<T>(value: T): Promise<T> {
    this.calls++;
    await new Promise((resolve) => setTimeout(resolve, 40));
    return value;
  },
  books: [
    { id: '1', title: 'The Left Hand of Darkness', authorId: 'a1' },
    { id: '2', title: 'A Wizard of Earthsea', authorId: 'a1' },
    { id: '3', title: 'Kindred', authorId: 'a2' },
    { id: '4', title: 'Parable of the Sower', authorId: 'a2' },
  ] as BookRow[],
  authors: new Map([
    ['a1', { id: 'a1', name: 'Ursula K. Le Guin' }],
    ['a2', { id: 'a2', name: 'Octavia E. Butler' }],
  ]),
};

async function makeStore(): Promise<{ store?: Store; close(): Promise<void> }> {
  const url = process.env.REDIS_URL;
  if (!url) return { close: async () => {} };
  // Loaded only when asked for: the in-memory example needs neither ioredis nor the Redis store.
  const [{ Redis }, { redisStore }] = await Promise.all([import('ioredis'), import('herdcache/redis')]);
  // Reconnect within 100 ms of Redis answering again (ioredis backs off to 2 s): the fill lock is
  // back sooner after an outage (docs/redis.md, Recovery).
  const client = new Redis(url, { retryStrategy: (times) => Math.min(times * 50, 100) });
  // Without a listener ioredis prints "Unhandled error event" on every failed reconnect; the
  // cache degrades to computing values meanwhile, so a warning is all this needs.
  client.on('error', (error) => console.warn('redis:', error.message));
  return {
    store: redisStore({ client }),
    close: async () => {
      await client.quit();
    },
  };
}

interface Context {
  user?: string;
}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 4000);
  const metricsPort = Number(process.env.METRICS_PORT ?? 9464);
  const host = process.env.HOST ?? '127.0.0.1';

  const { store, close: closeStore } = await makeStore();
  const cache = createCache({ store });

  // Registry loaders: created once per process; each operation gets its own view in the context.
  const loaders = {
    author: cache.loader<string, { id: string; name: string }>({
      name: 'author',
      ttl: 5 * 60_000, // milliseconds in the TypeScript API
      batch: (ids) => backend.call(ids.map((id) => backend.authors.get(id) ?? new Error(`no author ${id}`))),
    }),
  };
  type Ctx = Context & HerdcacheContext<typeof loaders>;

  const schema = buildSchema(`${cachedDirectiveTypeDefs}\n${typeDefs}`);
  const resolvers: Record<string, Record<string, (parent: any, args: any, ctx: Ctx) => unknown>> = {
    Query: {
      books: () => backend.call(backend.books),
      book: (_parent, { id }: { id: string }) => backend.call(backend.books.find((book) => book.id === id) ?? null),
      // Resolved only with a user: without one, PRIVATE is not cached and this returns null.
      me: (_parent, _args, { user }) =>
        user === undefined
          ? null
          : backend.call({
              name: user,
              recommendations: backend.books.filter((book) => (user.length + Number(book.id)) % 2 === 0),
            }),
    },
    Book: {
      author: (book: BookRow, _args, ctx) => ctx.loaders.author.load(book.authorId),
      rating: (book: BookRow) => backend.call(3 + (Number(book.id) % 3) * 0.5),
    },
  };
  for (const [typeName, fields] of Object.entries(resolvers)) {
    const type = schema.getType(typeName) as GraphQLObjectType;
    for (const [fieldName, resolve] of Object.entries(fields)) type.getFields()[fieldName]!.resolve = resolve;
  }
  cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: Context) => ctx.user });

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // The cache's own counters (every source, not only GraphQL operations) and the store's health.
  await herdcacheMetrics({ cache, registry, stores: store === undefined ? [] : [store] });
  const server = new ApolloServer<Ctx>({
    schema,
    plugins: [herdcachePlugin<Ctx>({ cache, registry, extensions: true })],
    // Stopped below, with the metrics server and the store.
    stopOnTerminationSignals: false,
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port, host },
    context: async ({ req }) => {
      const user = req.headers['x-user'];
      return {
        ...herdcacheContext({ cache, loaders }),
        user: typeof user === 'string' && user !== '' ? user : undefined,
      };
    },
  });

  const metrics = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (error: unknown) => res.writeHead(500).end(String(error)),
    );
  });
  await new Promise<void>((resolve) => metrics.listen(metricsPort, host, resolve));

  console.log(`GraphQL  ${url}  (${store ? `Redis at ${process.env.REDIS_URL}` : 'in-memory cache'})`);
  console.log(`metrics  http://${host}:${metricsPort}/metrics`);

  const shutdown = async () => {
    await server.stop();
    await new Promise((resolve) => metrics.close(resolve));
    await cache.close();
    await closeStore();
    console.log(`bye (${backend.calls} backend calls served)`);
  };
  process.once('SIGINT', () => void shutdown());
  process.once('SIGTERM', () => void shutdown());
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

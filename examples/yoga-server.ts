/**
 * A runnable GraphQL Yoga 5 server on herdcache: the @cached directive, loaders in context, the
 * Envelop plugin (per-operation report in `extensions.cache`, Prometheus counters per operation)
 * and the cache's own metrics, with /metrics served beside /graphql.
 *
 *   npx tsx examples/yoga-server.ts
 *   curl -s localhost:4000/graphql -H 'content-type: application/json' -d '{"query":"query Top { top { id name } }"}'
 *   curl -s localhost:4000/metrics | grep herdcache_
 *
 * PORT (default 4000) and HOST (default 127.0.0.1) change where it listens.
 */
import { createServer } from 'node:http';
import { buildSchema, type GraphQLObjectType } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { Registry } from 'prom-client';
import { createCache } from 'herdcache';
import { useHerdcache } from 'herdcache/envelop';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from 'herdcache/graphql';
import { herdcacheMetrics } from 'herdcache/prometheus';

const cache = createCache();
const users = new Map([
  ['1', { id: '1', name: 'Ada' }],
  ['2', { id: '2', name: 'Grace' }],
]);
const loaders = {
  user: cache.loader<string, { id: string; name: string }>({
    name: 'user',
    ttl: 60_000, // milliseconds in the TypeScript API
    batch: async (ids) => ids.map((id) => users.get(id) ?? new Error(`no user ${id}`)),
  }),
};

// SDL first, then resolvers attached to the built schema's fields, then the directive transform.
const schema = buildSchema(`${cachedDirectiveTypeDefs}
  type Query {
    "The most followed users: computed once per 30 s however many requests ask (ttl in seconds)."
    top: [User!]! @cached(ttl: 30)
    user(id: ID!): User
  }
  type User { id: ID!, name: String! }
`);
const query = schema.getType('Query') as GraphQLObjectType;
query.getFields().top!.resolve = async () => [...users.values()];
query.getFields().user!.resolve = (_parent, { id }: { id: string }, ctx: ReturnType<typeof context>) =>
  ctx.loaders.user.load(id);
cachedDirectiveTransformer(schema, { cache });

const context = () => herdcacheContext({ cache, loaders });
const registry = new Registry();

async function main(): Promise<void> {
  await herdcacheMetrics({ cache, registry });
  const yoga = createYoga({ schema, context, plugins: [useHerdcache({ cache, registry, extensions: true })] });
  const server = createServer((req, res) => {
    if (req.url === '/metrics') {
      void registry.metrics().then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text));
      return;
    }
    void yoga(req, res);
  });
  const port = Number(process.env.PORT ?? 4000);
  const host = process.env.HOST ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  console.log(`GraphQL  http://${host}:${port}/graphql\nmetrics  http://${host}:${port}/metrics`);
  const stop = () => server.close(() => void cache.close());
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

/**
 * The servers of workload 9 (whole-response caches; herdcache from the built package when it is
 * current, see lib/package), run as a child process so the load
 * generator (in the parent) does not share its event loop. `HERDCACHE_BENCH_MODE` picks one:
 *   apollo-herd-response — Apollo 5, herdcachePlugin({ cache, responseCache: true }) and @cached fields;
 *   apollo-herd-fields   — Apollo 5, @cached fields and herdcachePlugin({ cache }) (no response layer);
 *   apollo-peer          — Apollo 5, @apollo/server-plugin-response-cache (fields uncached);
 *   yoga-herd-response   — Yoga 5, useHerdcache({ cache, responseCache: true }) and @cached fields;
 *   yoga-peer            — Yoga 5, @envelop/response-cache's useResponseCache (fields uncached).
 * The schema's hints are the same for all (@cacheControl: the peers' own policy source).
 *
 * `items` reads a database (DB_MS, counted: its calls are the operation's executions);
 * `page(n)` is built in memory (the varied-pages row measures the layer, not a database).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import ApolloServerPluginResponseCache from '@apollo/server-plugin-response-cache';
import { useResponseCache } from '@envelop/response-cache';
import { buildSchema, type GraphQLObjectType } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { apolloEntry, core, envelopEntry, graphqlEntry } from '../lib/package';
import { sleep } from '../lib/stats';

export type ResponseMode =
  'apollo-herd-response' | 'apollo-herd-fields' | 'apollo-peer' | 'yoga-herd-response' | 'yoga-peer';

const PAGE_ITEMS = 20;
const POOL_ITEMS = 1_000;
const DB_MS = Number(process.env.HERDCACHE_BENCH_DB_MS ?? 10);

const detailOf = (id: string) => ({ id, text: `detail of ${id}` });

async function main(): Promise<void> {
  // herdcache as the bench measures it (the built package when it is current: see lib/package).
  const { herdcachePlugin } = apolloEntry();
  const { useHerdcache } = envelopEntry();
  const graphqlPieces = graphqlEntry();
  const { createCache } = core;
  const mode = process.env.HERDCACHE_BENCH_MODE as ResponseMode;
  const herd = mode.includes('herd');
  const sdl = `
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
    type Query {
      items: [Item!]! @cacheControl(maxAge: 3600)
      page(n: Int!): [Item!]! @cacheControl(maxAge: 3600)
    }
    type Item @cacheControl(maxAge: 3600) { id: ID! name: String! detail: Detail! ${herd ? '@cached(ttl: 3600)' : ''} }
    type Detail @cacheControl(maxAge: 3600) { id: ID! text: String! }
    ${herd ? graphqlPieces.cachedDirectiveTypeDefs : ''}
  `;
  let executions = 0;
  let dbQueries = 0;
  const db = async <T>(compute: () => T): Promise<T> => {
    dbQueries++;
    await sleep(DB_MS);
    return compute();
  };
  const item = (i: number) => ({ id: String(i), name: `item ${i}` });
  let schema = buildSchema(sdl);
  const query = schema.getQueryType()!.getFields();
  query.items!.resolve = () => {
    executions++;
    return db(() => Array.from({ length: 100 }, (_, i) => item(i + 1)));
  };
  query.page!.resolve = (_root, { n }: { n: number }) =>
    Array.from({ length: PAGE_ITEMS }, (_, i) => item((n * 37 + i) % POOL_ITEMS));
  (schema.getType('Item') as GraphQLObjectType).getFields().detail!.resolve = (parent: { id: string }) =>
    db(() => detailOf(parent.id));

  const cache = createCache();
  if (herd) schema = graphqlPieces.cachedDirectiveTransformer(schema, { cache });

  let url: string;
  let stop: () => Promise<void>;
  if (mode.startsWith('apollo')) {
    const plugins: ApolloServerPlugin[] = [];
    if (mode === 'apollo-herd-response')
      plugins.push(herdcachePlugin({ cache, extensions: false, responseCache: true }));
    if (mode === 'apollo-herd-fields') plugins.push(herdcachePlugin({ cache, extensions: false }));
    if (mode === 'apollo-peer') plugins.push(ApolloServerPluginResponseCache());
    const server = new ApolloServer({ schema, plugins });
    ({ url } = await startStandaloneServer(server, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async () => (herd ? { ...graphqlPieces.herdcacheContext({ cache }) } : {}),
    }));
    stop = () => server.stop();
  } else {
    const plugins: unknown[] = [];
    if (mode === 'yoga-herd-response') plugins.push(useHerdcache({ cache, extensions: false, responseCache: true }));
    else plugins.push(useResponseCache({ session: () => null, ttl: 3_600_000 }));
    const yoga = createYoga({ schema, plugins: plugins as never[], logging: false });
    const server = createServer((req, res) => void yoga(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
    stop = () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
  }
  process.on('message', (message: string) => {
    if (message === 'stats') process.send!({ executions, dbQueries, cpu: process.cpuUsage() });
  });
  process.on('disconnect', () => void stop().then(() => process.exit(0)));
  process.send!({ url });
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.send?.({ error: (error as Error).message });
    console.error('response-server:', error);
    process.exit(1);
  });
}

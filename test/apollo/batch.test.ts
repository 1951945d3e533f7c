import { ApolloServer, HeaderMap } from '@apollo/server';
import { Registry } from 'prom-client';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, herdcacheContext } from '../../src/graphql';
import { makeSchema } from '../graphql/fixtures';

test('batched HTTP operations (one shared context): each response reports its own @cached fields, Prometheus counts each once', async () => {
  const cache = createCache();
  const schema = makeSchema(`type Query { a: Int @cached(ttl: 60)  b: Int @cached(ttl: 60) }`, {
    Query: { a: () => 1, b: () => 2 },
  });
  cachedDirectiveTransformer(schema, { cache });
  const registry = new Registry();
  const server = new ApolloServer({
    schema,
    allowBatchedHttpRequests: true,
    plugins: [herdcachePlugin({ cache, extensions: true, registry })],
  });
  await server.start();
  const headers = new HeaderMap([['content-type', 'application/json']]);
  const response = await server.executeHTTPGraphQLRequest({
    httpGraphQLRequest: {
      method: 'POST',
      headers,
      search: '',
      body: [{ query: 'query A { a }' }, { query: 'query B { b }' }],
    },
    context: async () => ({ ...herdcacheContext({ cache }) }), // as the README's context example
  });
  if (response.body.kind !== 'complete') throw new Error('expected a complete body');
  const [ra, rb] = JSON.parse(response.body.string) as {
    extensions: { cache: { sources: Record<string, unknown> } };
  }[];
  const misses = await registry.getSingleMetric('herdcache_misses_total')!.get();
  await server.stop();
  // Two misses happened in total.
  expect(misses.values.reduce((sum, v) => sum + v.value, 0)).toBe(2);
  // Operation A read only Query.a, operation B only Query.b.
  expect(Object.keys(ra!.extensions.cache.sources)).toEqual(['Query.a']);
  expect(Object.keys(rb!.extensions.cache.sources)).toEqual(['Query.b']);
});

test("batched HTTP operations: ctx.loaders and ctx.scope are each operation's own (its memo, its counts)", async () => {
  const cache = createCache();
  const batches: string[][] = [];
  const user = cache.loader<string, string>({
    name: 'user',
    ttl: 60_000,
    batch: async (ids) => {
      batches.push([...ids]);
      return ids.map((id) => `user ${id}`);
    },
  });
  const schema = makeSchema(`type Query { user(id: ID!): String }`, {
    Query: {
      user: (_: unknown, { id }: { id: string }, ctx: { loaders: { user: { load(id: string): Promise<string> } } }) =>
        ctx.loaders.user.load(id),
    },
  });
  cachedDirectiveTransformer(schema, { cache });
  const server = new ApolloServer({
    schema,
    allowBatchedHttpRequests: true,
    plugins: [herdcachePlugin({ cache, extensions: true })],
  });
  await server.start();
  const response = await server.executeHTTPGraphQLRequest({
    httpGraphQLRequest: {
      method: 'POST',
      headers: new HeaderMap([['content-type', 'application/json']]),
      search: '',
      body: [
        { query: 'query A { a1: user(id: "1") }' },
        { query: 'query B { b1: user(id: "2") b2: user(id: "3") }' },
        { query: 'query C { c1: user(id: "1") c2: user(id: "4") }' },
      ],
    },
    context: async () => herdcacheContext({ cache, loaders: { user } }), // once per HTTP request
  });
  await server.stop();
  if (response.body.kind !== 'complete') throw new Error('expected a complete body');
  type Sources = Record<string, { hits: number; misses: number; coalesced: number } | undefined>;
  const answers = JSON.parse(response.body.string) as {
    data: Record<string, string>;
    extensions: { cache: { sources: Sources } };
  }[];
  expect(answers.map((a) => a.data)).toEqual([
    { a1: 'user 1' },
    { b1: 'user 2', b2: 'user 3' },
    { c1: 'user 1', c2: 'user 4' },
  ]);
  const loads = answers.map(({ extensions }) => {
    const s = extensions.cache.sources.user;
    return s === undefined ? 0 : s.hits + s.misses + s.coalesced;
  });
  // Each operation's report counts its own loads, exactly (A 1, B 2, C 2).
  expect(loads).toEqual([1, 2, 2]);
  // Four distinct keys, each filled once (C's user 1 was A's: a hit or a coalesced load, not a fill).
  expect(batches.flat().sort()).toEqual(['1', '2', '3', '4']);
});

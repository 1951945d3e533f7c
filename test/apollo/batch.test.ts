import { ApolloServer, HeaderMap } from '@apollo/server';
import { Registry } from 'prom-client';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, herdcacheContext } from '../../src/graphql';
import { makeSchema } from '../graphql/fixtures';

test("batched HTTP operations (one shared context): each response reports the other op's loads, Prometheus counts them twice", async () => {
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

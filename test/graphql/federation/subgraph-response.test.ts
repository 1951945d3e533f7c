/**
 * On a subgraph with the response layer on and a `defaultMaxAge` (as docs/response-cache.md asks
 * of Apollo), `_entities` (the gateway's entity fetches) is bypassed (`no_cache_hint`), as the docs
 * say: its answer would be stored without any tag an invalidation could reach (the gateway selects
 * no id), so a renamed product stayed old until the maxAge ended. Counted: outcomes, and the name
 * read after each invalidation.
 */
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { herdcachePlugin } from '../../../src/apollo/plugin';
import { createCache } from '../../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../../src/graphql';

// What a gateway sends: the representation, and the fields it wants, without __typename or id.
const FETCH = 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { name } } }';

it('the gateway fetch is bypassed, not stored: an invalidation reaches the next one', async () => {
  const cache = createCache();
  const names: Record<string, string> = { 1: 'one' };
  const schema = buildSubgraphSchema({
    typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${cachedDirectiveTypeDefs}
      type Product @key(fields: "id") @cached(ttl: 60, tags: ["Product:{id}"]) { id: ID!, name: String! }
      type Query { product(id: ID!): Product }`),
    resolvers: {
      Product: { __resolveReference: (ref: { id: string }) => ({ id: ref.id, name: names[ref.id] }) },
    } as never,
  });
  cachedDirectiveTransformer(schema, { cache });
  const server = new ApolloServer({
    schema,
    plugins: [
      herdcachePlugin({ cache, extensions: true, responseCache: { defaultMaxAge: 60 } }),
      ApolloServerPluginCacheControl({ defaultMaxAge: 60 }),
    ],
  });
  await server.start();
  const fetch = async () => {
    const response = await server.executeOperation(
      { query: FETCH, variables: { r: [{ __typename: 'Product', id: '1' }] } },
      { contextValue: herdcacheContext({ cache }) },
    );
    if (response.body.kind !== 'single') throw new Error('not single');
    const result = response.body.singleResult as {
      data?: { _entities: { name: string }[] };
      extensions?: { cache?: { response?: string; bypassReason?: string } };
    };
    return { name: result.data?._entities[0]?.name, cache: result.extensions?.cache };
  };
  try {
    const first = await fetch();
    expect(first.name).toBe('one');
    expect(first.cache).toMatchObject({ response: 'bypassed', bypassReason: 'no_cache_hint' });
    expect((await fetch()).cache?.response).toBe('bypassed');
    names['1'] = 'uno';
    await cache.invalidateTags(['Product:1']);
    expect((await fetch()).name).toBe('uno');
  } finally {
    await server.stop();
    await cache.close();
  }
});

/**
 * @cached on a Federation entity type and Apollo's cache-control: `_entities` resolves every
 * representation under one field policy, so the cap herdcache puts on it is applied once per
 * policy. The header is never more cacheable than Apollo alone makes it, however many
 * representations a request carries.
 */
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { createCache } from '../../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../../src/graphql';

const CACHE_CONTROL = `enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION`;
const ENTITIES =
  'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { name } ... on Shop { name } } }';

async function headers(typeDefs: string, cached: boolean, defaultMaxAge?: number): Promise<(string | undefined)[]> {
  const schema = buildSubgraphSchema({
    typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${CACHE_CONTROL}
      ${cachedDirectiveTypeDefs}
      ${typeDefs}
      type Query { product(id: ID!): Product }`),
    resolvers: {
      Product: { __resolveReference: (ref: { id: string }) => ({ id: ref.id, name: `p${ref.id}` }) },
      Shop: { __resolveReference: (ref: { id: string }) => ({ id: ref.id, name: `s${ref.id}` }) },
    } as never,
  });
  const cache = createCache();
  if (cached) cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { user?: string }) => ctx.user });
  const plugins = defaultMaxAge === undefined ? [] : [ApolloServerPluginCacheControl({ defaultMaxAge })];
  const server = new ApolloServer({ schema, plugins });
  await server.start();
  try {
    const out: (string | undefined)[] = [];
    const requests = [
      [['Product', '1']],
      [
        ['Product', '1'],
        ['Product', '2'],
      ],
      [
        ['Product', '3'],
        ['Product', '3'],
        ['Product', '4'],
      ],
      [
        ['Product', '5'],
        ['Shop', '1'],
      ],
    ];
    for (const reps of requests) {
      const response = await server.executeOperation(
        { query: ENTITIES, variables: { r: reps.map(([__typename, id]) => ({ __typename, id })) } },
        { contextValue: { ...herdcacheContext({ cache }), user: 'u1' } },
      );
      expect(response.body.kind === 'single' && response.body.singleResult.errors).toBeFalsy();
      out.push(response.http.headers.get('cache-control'));
    }
    return out;
  } finally {
    await server.stop();
  }
}

const SHOP = 'type Shop @key(fields: "id") @cached(ttl: 10) { id: ID!, name: String! }';

it('with one or many representations, @cached leaves an uncacheable _entities response uncacheable', async () => {
  const apolloAlone = await headers(
    `type Product @key(fields: "id") { id: ID!, name: String! } ${SHOP.replace('@cached(ttl: 10) ', '')}`,
    false,
  );
  expect(apolloAlone).toEqual(['no-store', 'no-store', 'no-store', 'no-store']);
  expect(
    await headers(`type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, name: String! } ${SHOP}`, true),
  ).toEqual(apolloAlone);
  expect(
    await headers(
      `type Product @key(fields: "id") @cached(ttl: 60, scope: PRIVATE) { id: ID!, name: String! } ${SHOP}`,
      true,
    ),
  ).toEqual(apolloAlone);
});

it('with a server defaultMaxAge, the smallest ttl of the entities resolved caps it, however many there are', async () => {
  const typeDefs = `type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, name: String! } ${SHOP}`;
  expect(await headers(typeDefs, true, 300)).toEqual([
    'max-age=60, public',
    'max-age=60, public',
    'max-age=60, public',
    'max-age=10, public',
  ]);
});

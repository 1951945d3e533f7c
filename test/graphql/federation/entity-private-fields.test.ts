/**
 * A @cached entity whose value holds a field hinted `@cacheControl(scope: PRIVATE)` (read from the
 * cached object: no resolver of its own) is PRIVATE, as a @cached field returning that type is:
 * keyed per session, and refused at build without `sessionId`. Before, only the type's own hint
 * counted: the first viewer's entity was served to every other viewer.
 * Counted: reference resolutions and which viewer each answer was made for.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import { graphql, parse } from 'graphql';
import { createCache } from '../../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../../src/graphql';

const CACHE_CONTROL = `enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION`;
const ENTITIES = 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { id viewerPrice } } }';

type Ctx = { user?: string };

function subgraph() {
  let calls = 0;
  const schema = buildSubgraphSchema({
    typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${CACHE_CONTROL}
      ${cachedDirectiveTypeDefs}
      type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, viewerPrice: String @cacheControl(scope: PRIVATE) }
      type Query { product(id: ID!): Product }`),
    resolvers: {
      Product: {
        __resolveReference: (ref: { id: string }, ctx: Ctx) => {
          calls++;
          return { id: ref.id, viewerPrice: `price of ${ref.id} for ${ctx.user}` };
        },
      },
    } as never,
  });
  return { schema, calls: () => calls };
}

it('is keyed per session: each viewer gets their own entity', async () => {
  const cache = createCache();
  const { schema, calls } = subgraph();
  cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: Ctx) => ctx.user });
  const answers: unknown[] = [];
  for (const user of ['alice', 'bob', 'carol', 'alice']) {
    const result = await graphql({
      schema,
      source: ENTITIES,
      variableValues: { r: [{ __typename: 'Product', id: '1' }] },
      contextValue: { user, ...herdcacheContext({ cache }) },
    });
    expect(result.errors).toBeUndefined();
    answers.push((result.data as { _entities: { viewerPrice: string }[] })._entities[0]!.viewerPrice);
  }
  expect(answers).toEqual([
    'price of 1 for alice',
    'price of 1 for bob',
    'price of 1 for carol',
    'price of 1 for alice',
  ]);
  expect(calls()).toBe(3); // alice's second read is her own cached entity
  await cache.close();
});

it('without sessionId, the transform refuses it and names the PRIVATE field', () => {
  const { schema } = subgraph();
  expect(() => cachedDirectiveTransformer(schema, { cache: createCache() })).toThrow(
    /@cached on the type Product is PRIVATE: @cacheControl\(scope: PRIVATE\) on field Product\.viewerPrice/,
  );
});

/**
 * Which representations a @cached entity caches, and how its @key is found:
 * - only a representation carrying the fields of one of its @key is keyed; one without them (a
 *   client's `{ __typename, name }`) is resolved without the cache (`no_identity`), as the docs say,
 *   so no client plants an entry under a shape of its choosing;
 * - @key is found under Federation 2's namespaced name (`@federation__key`, a @link that does not
 *   import it) and under an alias (`import: [{ name: "@key", as: "@primaryKey" }]`), as
 *   @apollo/subgraph finds it.
 * Counted: reference resolutions.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import { graphql, parse } from 'graphql';
import { createCache } from '../../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../../src/graphql';

const ENTITIES = 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { id } } }';

function subgraph(link: string, key: string) {
  let calls = 0;
  const schema = buildSubgraphSchema({
    typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", ${link})
      ${cachedDirectiveTypeDefs}
      type Product ${key} @cached(ttl: 60) { id: ID!, sku: String, name: String }
      type Query { top: Int }`),
    resolvers: {
      Product: {
        __resolveReference: (ref: { id?: string }) => {
          calls++;
          return { id: ref.id ?? 'none' };
        },
      },
    } as never,
  });
  const cache = createCache();
  cachedDirectiveTransformer(schema, { cache });
  const run = async (r: object[]) => {
    const context = herdcacheContext({ cache });
    const result = await graphql({ schema, source: ENTITIES, variableValues: { r }, contextValue: context });
    expect(result.errors).toBeUndefined();
    return context.scope.stats();
  };
  return { run, calls: () => calls, cache };
}

it('a representation without the key fields is resolved without the cache, each time', async () => {
  const { run, calls, cache } = subgraph('import: ["@key"]', '@key(fields: "id")');
  const strays = [
    { __typename: 'Product', name: 'x' },
    { __typename: 'Product', sku: 42 },
    { __typename: 'Product', id: null },
  ];
  for (let i = 0; i < 2; i++) await run(strays);
  expect(calls()).toBe(6); // never cached
  expect(cache.metrics().total.hits + cache.metrics().total.misses).toBe(0);
  // With its key: cached once.
  for (let i = 0; i < 2; i++) await run([{ __typename: 'Product', id: '1' }]);
  expect(calls()).toBe(7);
  await cache.close();
});

it.each([
  ['namespaced', 'import: []', '@federation__key(fields: "id")'],
  ['in a renamed namespace', 'as: "fed", import: []', '@fed__key(fields: "id")'],
  ['renamed', 'import: [{ name: "@key", as: "@primaryKey" }]', '@primaryKey(fields: "id")'],
  ['compound', 'import: ["@key"]', '@key(fields: "id sku")'],
])('@key %s: found, and its representations cached', async (_label, link, key) => {
  const { run, calls, cache } = subgraph(link, key);
  const rep = { __typename: 'Product', id: '1', sku: 's1' };
  for (let i = 0; i < 3; i++) await run([rep]);
  expect(calls()).toBe(1);
  await cache.close();
});

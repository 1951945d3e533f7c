/**
 * A @cached field with Federation's @requires: its value depends on the parent fields it requires
 * (sent by the gateway in the representation, or by any client of the subgraph), so they are part
 * of its key, beside the parent's identity. Keyed by the id alone, a value computed from one
 * `weight` was served for every other.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import {
  GraphQLID,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  graphql,
  parse,
  specifiedDirectives,
} from 'graphql';
import { createCache } from '../../../src/core/cache';
import { memoryStore } from '../../../src/core/memory';
import {
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  cachedFieldKey,
  herdcacheDirectives,
} from '../../../src/graphql';

function subgraph(link: string, requires: string) {
  const store = memoryStore();
  const cache = createCache({ store });
  let calls = 0;
  const schema = buildSubgraphSchema({
    typeDefs: parse(`${link}
      ${cachedDirectiveTypeDefs}
      type Dimensions { depth: Int }
      type Product @key(fields: "id") {
        id: ID!
        weight: Int @external
        dimensions: Dimensions @external
        shipping: Int ${requires}(fields: "weight dimensions { depth }") @cached(ttl: 60)
      }
      type Query { x: Int }`),
    resolvers: {
      Product: {
        shipping: (product: { weight: number; dimensions?: { depth: number } }) => (
          calls++,
          product.weight * 2 + (product.dimensions?.depth ?? 0)
        ),
      },
    },
  });
  cachedDirectiveTransformer(schema, { cache });
  const shipping = async (representation: Record<string, unknown>) => {
    const result = await graphql({
      schema,
      source: 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { shipping } } }',
      variableValues: { r: [{ __typename: 'Product', id: '1', ...representation }] },
      contextValue: {},
    });
    expect(result.errors).toBeUndefined();
    return (result.data as { _entities: { shipping: number }[] })._entities[0]!.shipping;
  };
  return { shipping, calls: () => calls, store };
}

describe.each([
  [
    'imported',
    'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@external", "@requires"])',
    '@requires',
  ],
  [
    'namespaced',
    'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@external"])',
    '@federation__requires',
  ],
  [
    'aliased',
    'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@external", { name: "@requires", as: "@needs" }])',
    '@needs',
  ],
  [
    'in a renamed namespace',
    'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", as: "fed", import: ["@key", "@external"])',
    '@fed__requires',
  ],
])('@requires (%s)', (_name, link, requires) => {
  it('is keyed with the fields it requires: each weight its own value, each computed once', async () => {
    const { shipping, calls } = subgraph(link, requires);
    expect(await shipping({ weight: 99_999, dimensions: { depth: 1 } })).toBe(199_999);
    expect(await shipping({ weight: 5, dimensions: { depth: 1 } })).toBe(11);
    expect(await shipping({ weight: 5, dimensions: { depth: 2 } })).toBe(12);
    expect(await shipping({ weight: 5, dimensions: { depth: 1 } })).toBe(11);
    expect(calls()).toBe(3);
  });
});

it('the key: the identity and the required fields, canonical (cachedFieldKey with that identity finds it)', async () => {
  const { shipping, store } = subgraph(
    'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@external", "@requires"])',
    '@requires',
  );
  await shipping({ dimensions: { depth: 1 }, weight: 5 });
  const identity = JSON.stringify(['1', { dimensions: { depth: 1 }, weight: 5 }]);
  expect(store.getSync(cachedFieldKey('Product.shipping', { identity }))?.value).toBe(11);
});

it('code-first: @requires in extensions.directives keys the field as SDL does', async () => {
  let calls = 0;
  const Product = new GraphQLObjectType({
    name: 'Product',
    extensions: { directives: { key: { fields: 'id' } } },
    fields: {
      id: { type: new GraphQLNonNull(GraphQLID) },
      weight: { type: GraphQLInt, extensions: { directives: { external: {} } } },
      shipping: {
        type: GraphQLInt,
        extensions: { directives: { cached: { ttl: 60 }, requires: { fields: 'weight' } } },
        resolve: (product: { weight: number }) => (calls++, product.weight * 2),
      },
    },
  });
  const schema = new GraphQLSchema({
    directives: [...specifiedDirectives, ...herdcacheDirectives],
    query: new GraphQLObjectType({
      name: 'Query',
      fields: {
        // Stands in for _entities: the representation (the id and the required weight) is the parent.
        product: {
          type: Product,
          args: { weight: { type: GraphQLInt } },
          resolve: (_root, { weight }: { weight: number }) => ({ id: '1', weight }),
        },
      },
    }),
  });
  cachedDirectiveTransformer(schema, { cache: createCache({ store: memoryStore() }) });
  const shipping = async (weight: number) =>
    (await graphql({ schema, source: `{ product(weight: ${weight}) { shipping } }` })).data;
  expect(await shipping(5)).toEqual({ product: { shipping: 10 } });
  expect(await shipping(7)).toEqual({ product: { shipping: 14 } });
  expect(await shipping(5)).toEqual({ product: { shipping: 10 } });
  expect(calls).toBe(2);
});

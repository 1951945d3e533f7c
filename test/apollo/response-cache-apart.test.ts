/**
 * A run apart (a background refresh) gives the SAME data as the request's own execution, on the
 * schemas and server options an application brings: abstract types (resolveType, isTypeOf), custom
 * scalars, enums with internal values, input defaults, introspection fields, graphql-tools and
 * @apollo/subgraph schemas (a query; `_entities` is never cached whole), Apollo's `rootValue` and `fieldResolver` options.
 */
import { ApolloServer, type ApolloServerOptions, type BaseContext } from '@apollo/server';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { GraphQLScalarType, Kind, buildSchema, parse } from 'graphql';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { type HerdcachePluginOptions, herdcachePlugin } from '../../src/apollo';
import { createCache, manualClock } from '../../src/core';
import { until } from '../graphql/response-fixture';

const cacheControl = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
`;

type Body = { data?: unknown; errors?: unknown; extensions: { cache: { response: string } } };

/** The data of a miss, then of the response its background refresh stored (served as a hit). */
async function missThenRefreshed(
  options: ApolloServerOptions<BaseContext>,
  query: string,
  variables?: Record<string, unknown>,
  defaultMaxAge?: number,
  execution: Pick<HerdcachePluginOptions, 'rootValue' | 'fieldResolver'> = {},
): Promise<{ executed: Body; refreshed: Body }> {
  const clock = manualClock();
  const cache = createCache({ clock });
  const server = new ApolloServer({
    ...options,
    plugins: [
      ...(defaultMaxAge === undefined ? [] : [ApolloServerPluginCacheControl({ defaultMaxAge })]),
      herdcachePlugin({ cache, extensions: true, responseCache: { swr: 60, defaultMaxAge }, ...execution }),
    ],
  } as ApolloServerOptions<BaseContext>);
  await server.start();
  const ask = async () => {
    const response = await server.executeOperation({ query, variables });
    return (response.body as unknown as { singleResult: Body }).singleResult;
  };
  try {
    const executed = await ask();
    expect(executed.extensions.cache).toMatchObject({ response: 'miss' });
    clock.advance(11_000); // past maxAge, within swr
    expect((await ask()).extensions.cache.response).toBe('stale');
    await until(() => cache.inFlight === 0, 'the refresh');
    const refreshed = await ask();
    return { executed, refreshed };
  } finally {
    await server.stop();
    await cache.close();
  }
}

function expectSame({ executed, refreshed }: { executed: Body; refreshed: Body }): void {
  expect(executed.errors).toBeUndefined();
  expect(refreshed.extensions.cache.response).toBe('hit'); // the refresh was stored
  expect(refreshed.data).toEqual(executed.data);
}

const animals = `${cacheControl}
  interface Animal @cacheControl(maxAge: 10) { name: String! }
  type Dog implements Animal @cacheControl(maxAge: 10) { name: String!, barks: Boolean! }
  type Cat implements Animal @cacheControl(maxAge: 10) { name: String!, lives: Int! }
  union Pet @cacheControl(maxAge: 10) = Dog | Cat
  scalar Money
  enum Size { SMALL LARGE }
  input Filter { size: Size = LARGE, limit: Int = 2 }
  type Query {
    animals: [Animal!]! @cacheControl(maxAge: 10)
    pets: [Pet!]! @cacheControl(maxAge: 10)
    price: Money @cacheControl(maxAge: 10)
    size: Size @cacheControl(maxAge: 10)
    filtered(filter: Filter = {}): String @cacheControl(maxAge: 10)
  }
`;
const animalsQuery = `{
  animals { __typename name ... on Dog { barks } ... on Cat { lives } }
  pets { __typename ... on Dog { name } ... on Cat { lives } }
  price size filtered
  __typename
  __type(name: "Size") { name enumValues { name } }
}`;
const animalData = [
  { kind: 'dog', name: 'Rex', barks: true },
  { kind: 'cat', name: 'Tom', lives: 9 },
];
const money = new GraphQLScalarType({
  name: 'Money',
  serialize: (cents) => `$${((cents as number) / 100).toFixed(2)}`,
  parseValue: (value) => value,
  parseLiteral: (ast) => (ast.kind === Kind.STRING ? ast.value : null),
});

describe('a refresh gives the data the request execution gave', () => {
  it('interfaces (resolveType), unions (isTypeOf), a custom scalar, internal enum values, input defaults, introspection', async () => {
    const schema = makeExecutableSchema({
      typeDefs: animals,
      resolvers: {
        Money: money,
        Size: { SMALL: 's', LARGE: 'l' },
        Animal: { __resolveType: (animal: { kind: string }) => (animal.kind === 'dog' ? 'Dog' : 'Cat') },
        // Both match a 'both': the union's first member (Dog) is the one graphql tries first.
        Dog: { __isTypeOf: (animal: { kind: string }) => animal.kind !== 'cat' },
        Cat: { __isTypeOf: (animal: { kind: string }) => animal.kind !== 'dog' },
        Query: {
          animals: () => animalData,
          pets: () => [...animalData, { kind: 'both', name: 'Odd', barks: false, lives: 1 }],
          price: () => 1234,
          size: () => 'l',
          filtered: (_p: unknown, { filter }: { filter: { size: string; limit: number } }) =>
            `${filter.size}/${filter.limit}`,
        },
      },
    });
    const result = await missThenRefreshed({ schema }, animalsQuery);
    expect(result.executed.data).toMatchObject({
      price: '$12.34',
      size: 'LARGE',
      filtered: 'LARGE/2', // the SDL default, as graphql-tools builds it
      pets: [{ __typename: 'Dog' }, { __typename: 'Cat' }, { __typename: 'Dog', name: 'Odd' }],
      __type: { enumValues: [{ name: 'SMALL' }, { name: 'LARGE' }] },
    });
    expectSame(result);
  });

  // `_entities` itself is never cached whole (test/graphql/federation/subgraph-response.test.ts).
  it('@apollo/subgraph: a query of a subgraph schema', async () => {
    const schema = buildSubgraphSchema({
      typeDefs: parse(`
        extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        ${cacheControl}
        type Product @key(fields: "id") @cacheControl(maxAge: 10) { id: ID!, name: String! }
        type Query { product(id: ID!): Product @cacheControl(maxAge: 10) }
      `),
      resolvers: {
        Product: { __resolveReference: ({ id }: { id: string }) => ({ id, name: `product ${id}` }) },
        Query: { product: (_p: unknown, { id }: { id: string }) => ({ id, name: `product ${id}` }) },
      } as never,
    });
    const result = await missThenRefreshed(
      { schema },
      'query ($id: ID!) { product(id: $id) { id name } }',
      { id: '1' },
      10,
    );
    expect(result.executed.data).toEqual({ product: { id: '1', name: 'product 1' } });
    expectSame(result);
  });

  it("Apollo's rootValue option, given to the plugin too (a function of the document, as Apollo calls it)", async () => {
    const schema = buildSchema(`${cacheControl} type Query { hello: String @cacheControl(maxAge: 10) }`);
    const rootValue = () => ({ hello: 'from the root value' });
    const result = await missThenRefreshed({ schema, rootValue }, '{ hello }', undefined, undefined, { rootValue });
    expect(result.executed.data).toEqual({ hello: 'from the root value' });
    expectSame(result);
  });

  it("Apollo's fieldResolver option, given to the plugin too", async () => {
    const schema = buildSchema(`${cacheControl}
      type Item @cacheControl(maxAge: 10) { label: String }
      type Query { item: Item @cacheControl(maxAge: 10) }`);
    schema.getQueryType()!.getFields().item!.resolve = () => ({ raw_label: 'snake' });
    const fieldResolver = (
      source: Record<string, unknown>,
      _args: unknown,
      _ctx: unknown,
      info: { fieldName: string },
    ) => source[`raw_${info.fieldName}`];
    const result = await missThenRefreshed({ schema, fieldResolver }, '{ item { label } }', undefined, undefined, {
      fieldResolver,
    });
    expect(result.executed.data).toEqual({ item: { label: 'snake' } });
    expectSame(result);
  });
});

/**
 * A schema whose @cached fields cachedDirectiveTransformer never wrapped (not applied): the fields
 * run on every call and the reports count nothing, so the plugins say it once
 * (HERDCACHE_NOT_TRANSFORMED), naming the fields, on Apollo 5 and Yoga 5. A transformed schema is
 * silent, also when a tool applied after the transform wraps its resolvers again (as
 * graphql-middleware and graphql-shield do).
 */
import { ApolloServer } from '@apollo/server';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { buildSchema, parse, type GraphQLObjectType, type GraphQLSchema } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../src/graphql';
import { captureWarnings } from '../helpers';

const warnings = captureWarnings();

function schemaOf(attach: 'before' | 'after' | 'never') {
  const cache = createCache();
  const schema = buildSchema(`${cachedDirectiveTypeDefs}
    type Query { top: [Item!]! @cached(ttl: 60), plain: Int }
    type Item { id: ID!, detail: String @cached(ttl: 60) }
  `);
  let calls = 0;
  const resolvers = (s: GraphQLSchema) => {
    s.getQueryType()!.getFields().top!.resolve = () => {
      calls++;
      return [{ id: '1' }];
    };
    (s.getType('Item') as GraphQLObjectType).getFields().detail!.resolve = (item: { id: string }) => `d${item.id}`;
  };
  if (attach === 'before') resolvers(schema);
  if (attach !== 'never') cachedDirectiveTransformer(schema, { cache });
  if (attach !== 'before') resolvers(schema);
  return { cache, schema, calls: () => calls };
}

const notTransformed = () => warnings.filter((warning) => warning.code === 'HERDCACHE_NOT_TRANSFORMED');

describe.each([['not applied', 'never']] as const)('the transform %s', (_label, attach) => {
  it('Apollo: one warning naming the fields, at start', async () => {
    const { cache, schema } = schemaOf(attach);
    const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache })] });
    await server.start();
    try {
      await server.executeOperation({ query: '{ top { detail } }' }, { contextValue: herdcacheContext({ cache }) });
      expect(notTransformed()).toHaveLength(1);
      expect(notTransformed()[0]!.message).toContain('Query.top, Item.detail');
      expect(notTransformed()[0]!.message).toContain('herdcachePlugin');
    } finally {
      await server.stop();
    }
  });

  it('Yoga: one warning naming the fields', async () => {
    const { cache, schema } = schemaOf(attach);
    const yoga = createYoga({ schema, logging: false, plugins: [useHerdcache({ cache })] });
    for (let i = 0; i < 2; i++) {
      await yoga.fetch('http://localhost/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ top { detail } }' }),
      });
    }
    expect(notTransformed()).toHaveLength(1);
    expect(notTransformed()[0]!.message).toContain('Query.top, Item.detail');
  });
});

it('a schema transformed after its resolvers: no warning, and the field is cached', async () => {
  const { cache, schema, calls } = schemaOf('before');
  const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache })] });
  await server.start();
  const yoga = createYoga({ schema, logging: false, plugins: [useHerdcache({ cache })] });
  try {
    for (let i = 0; i < 3; i++)
      await server.executeOperation({ query: '{ top { id } }' }, { contextValue: herdcacheContext({ cache }) });
    await yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ top { id } }' }),
    });
    expect(calls()).toBe(1);
    expect(notTransformed()).toEqual([]);
  } finally {
    await server.stop();
  }
});

it('a resolver wrapped again after the transform (a middleware): no warning, and the field still cached', async () => {
  const { cache, schema, calls } = schemaOf('before');
  for (const type of [schema.getQueryType()!, schema.getType('Item') as GraphQLObjectType]) {
    for (const field of Object.values(type.getFields())) {
      const inner = field.resolve;
      if (inner !== undefined) field.resolve = (...args) => inner(...args); // what applyMiddleware leaves
    }
  }
  const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache })] });
  await server.start();
  try {
    for (let i = 0; i < 3; i++)
      await server.executeOperation({ query: '{ top { id } }' }, { contextValue: herdcacheContext({ cache }) });
    expect(calls()).toBe(1);
    expect(notTransformed()).toEqual([]);
  } finally {
    await server.stop();
  }
});

it('a transform given another cache than the plugin: cached in its own, said once (the reports count nothing for it)', async () => {
  const { cache: transformCache, schema, calls } = schemaOf('before');
  const pluginCache = createCache();
  const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache: pluginCache })] });
  await server.start();
  try {
    for (let i = 0; i < 3; i++)
      await server.executeOperation(
        { query: '{ top { id } }' },
        { contextValue: herdcacheContext({ cache: pluginCache }) },
      );
    expect(calls()).toBe(1);
    expect(warnings.filter((warning) => warning.code === 'HERDCACHE_OTHER_CACHE')).toHaveLength(1);
    expect(transformCache.metrics().total.hits).toBe(2);
  } finally {
    await server.stop();
  }
});

describe('a Federation entity type carrying @cached', () => {
  const subgraph = (transform: boolean) => {
    const cache = createCache();
    const schema = buildSubgraphSchema({
      typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        ${cachedDirectiveTypeDefs}
        type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, name: String! }
        type Query { top: Int }`),
      resolvers: { Product: { __resolveReference: (ref: { id: string }) => ({ id: ref.id, name: 'n' }) } } as never,
    });
    if (transform) cachedDirectiveTransformer(schema, { cache });
    return { cache, schema };
  };

  it.each([
    [false, 1],
    [true, 0],
  ])('transformed %s: %i warning(s) naming Product.__resolveReference', async (transform, expected) => {
    const { cache, schema } = subgraph(transform);
    const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache })] });
    await server.start();
    try {
      expect(notTransformed()).toHaveLength(expected);
      if (expected > 0) expect(notTransformed()[0]!.message).toContain('Product.__resolveReference');
    } finally {
      await server.stop();
    }
  });
});

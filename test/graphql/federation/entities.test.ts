/**
 * @cached on a Federation entity type, on the subgraph alone (graphql-js executing `_entities` as
 * the gateway sends it): one store read for the misses of one request, one __resolveReference per
 * key across replicas sharing Redis, keys and tags, build errors.
 */
import type Redis from 'ioredis';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { graphql, parse, type GraphQLObjectType } from 'graphql';
import { createCache } from '../../../src/core/cache';
import { memoryStore } from '../../../src/core/memory';
import {
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  cachedFieldKey,
  herdcacheContext,
} from '../../../src/graphql';
import { redisStore } from '../../../src/redis/redis-store';
import { asyncStore, countingStore } from '../../helpers';
import { connect, randomPrefix } from '../../redis/helpers';
import { PRODUCTS, productsSchema } from './fixtures';

const ENTITIES =
  'query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on Product { id name price } } }';

function representations(n: number, over = PRODUCTS): { __typename: string; id: string }[] {
  return Array.from({ length: n }, (_, i) => ({ __typename: 'Product', id: String(i % over) }));
}

async function entities(schema: Parameters<typeof graphql>[0]['schema'], reps: object[], contextValue: object = {}) {
  const result = await graphql({ schema, source: ENTITIES, variableValues: { representations: reps }, contextValue });
  expect(result.errors).toBeUndefined();
  return (result.data as { _entities: { id: string; name: string }[] })._entities;
}

describe('@cached entities on the subgraph', () => {
  it('the misses of one _entities request (20 representations, 5 products) are read in one store call, 5 keys', async () => {
    const inner = memoryStore();
    const counting = asyncStore(inner);
    const cache = createCache({ store: { ...counting.store, invalidateTags: (tags) => inner.invalidateTags(tags) } });
    const { schema, calls } = productsSchema(cache);
    const answer = await entities(schema, representations(20), herdcacheContext({ cache }));
    expect(answer.map((product) => product.id)).toEqual(representations(20).map((rep) => rep.id));
    expect(counting.calls.getMany).toBe(1);
    expect(counting.calls.getManyKeys[0]).toHaveLength(PRODUCTS);
    expect(calls.resolveReference).toBe(PRODUCTS);
    // Warm: hits, no more reference resolution.
    await entities(schema, representations(20));
    expect(calls.resolveReference).toBe(PRODUCTS);
  });

  it('the key is the type and the representation, canonical: cachedFieldKey names it for cache.invalidate', async () => {
    const cache = createCache();
    const { schema, calls, names } = productsSchema(cache);
    await entities(schema, representations(5));
    names.set('2', 'changed');
    await cache.invalidate(cachedFieldKey('Product.__resolveReference', { args: { id: '2' } }));
    const answer = await entities(schema, representations(5));
    expect(answer[2]!.name).toBe('changed');
    expect(calls.byId).toEqual({ 0: 1, 1: 1, 2: 2, 3: 1, 4: 1 });
  });

  it('tags from the representation: invalidateTags(["Product:1"]) drops that entity only', async () => {
    const cache = createCache();
    const { schema, calls } = productsSchema(cache);
    await entities(schema, representations(5));
    await cache.invalidateTags(['Product:1']);
    await entities(schema, representations(5));
    expect(calls.byId).toEqual({ 0: 1, 1: 2, 2: 1, 3: 1, 4: 1 });
  });

  it('PRIVATE: one value per session; no session → resolved without the cache, counted as bypassed', async () => {
    const cache = createCache();
    const bypassed: string[] = [];
    const { schema, calls } = productsSchema(cache, '@cached(ttl: 60, scope: PRIVATE)', {
      sessionId: (ctx: { user?: string }) => ctx.user,
      onBypass: (coordinate, reason) => bypassed.push(`${coordinate} ${reason}`),
    });
    await entities(schema, representations(5), { user: 'a' });
    await entities(schema, representations(5), { user: 'a' });
    expect(calls.resolveReference).toBe(5);
    await entities(schema, representations(5), { user: 'b' });
    expect(calls.resolveReference).toBe(10);
    await entities(schema, representations(1), {});
    expect(calls.resolveReference).toBe(11);
    expect(bypassed).toEqual(['Product.__resolveReference no_session']);
  });

  it('a representation that cannot be keyed (no key fields) is resolved without the cache', async () => {
    const cache = createCache();
    const bypassed: string[] = [];
    const { schema, calls } = productsSchema(cache, undefined, {
      onBypass: (coordinate, reason) => bypassed.push(`${coordinate} ${reason}`),
    });
    // (The answers fail graphql's non-null id: these representations name no product.)
    await graphql({
      schema,
      source: ENTITIES,
      variableValues: { representations: [{ __typename: 'Product' }, { __typename: 'Product' }] },
    });
    expect(calls.resolveReference).toBe(2);
    expect(bypassed).toEqual(['Product.__resolveReference no_identity', 'Product.__resolveReference no_identity']);
  });

  it('representations are keyed by the bounded encoder: too large or too deep → resolved uncached, with the reason; long ones hashed, in the field namespace', async () => {
    const store = memoryStore();
    const cache = createCache({ store });
    const bypassed: string[] = [];
    const { schema, calls } = productsSchema(cache, undefined, {
      onBypass: (coordinate, reason) => bypassed.push(`${coordinate} ${reason}`),
    });
    let deep: unknown = 'x';
    for (let i = 0; i < 100; i++) deep = { deep };
    const hostile = [
      { __typename: 'Product', id: '1', extra: 'y'.repeat(70_000) },
      { __typename: 'Product', id: '1', extra: deep },
    ];
    await graphql({ schema, source: ENTITIES, variableValues: { representations: hostile } });
    expect(calls.resolveReference).toBe(2);
    expect(bypassed).toEqual(['Product.__resolveReference args_too_large', 'Product.__resolveReference args_too_deep']);
    // 2,000 characters: keyed, by the sha256 of the encoding; twice → one resolution.
    const long = [{ __typename: 'Product', id: '1', extra: 'z'.repeat(2_000) }];
    await graphql({ schema, source: ENTITIES, variableValues: { representations: long } });
    await graphql({ schema, source: ENTITIES, variableValues: { representations: long } });
    expect(calls.resolveReference).toBe(3);
    const key = cachedFieldKey('Product.__resolveReference', { args: { id: '1', extra: 'z'.repeat(2_000) } });
    expect(key.startsWith('\0field\0gql:Product.__resolveReference:[null,#')).toBe(true);
    expect(store.getSync(key)).toBeDefined();
  });

  it('reference resolvers kept on type.resolveReference (older builds, schemas made by hand) are cached too', async () => {
    const cache = createCache();
    const built = buildSubgraphSchema({
      typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${cachedDirectiveTypeDefs}
      type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, name: String! }
      type Query { product(id: ID!): Product }`),
    });
    let resolved = 0;
    const type = built.getType('Product') as GraphQLObjectType & {
      resolveReference?: unknown;
      extensions: Record<string, unknown>;
    };
    (type as { extensions: unknown }).extensions = {};
    type.resolveReference = (reference: { id: string }) => {
      resolved++;
      return { id: reference.id, name: `p${reference.id}` };
    };
    cachedDirectiveTransformer(built, { cache });
    const wrapped = type.resolveReference as (reference: object, context: unknown, info: unknown) => unknown;
    const info = { cacheControl: undefined };
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => wrapped({ __typename: 'Product', id: '1' }, {}, info)),
    );
    expect(answers).toEqual(Array(10).fill({ id: '1', name: 'p1' }));
    expect(resolved).toBe(1);
  });

  it('a type-level @cached given in extensions.directives (code-first) caches the entity too', async () => {
    const cache = createCache();
    let resolved = 0;
    const schema = buildSubgraphSchema({
      typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        ${cachedDirectiveTypeDefs}
        type Product @key(fields: "id") { id: ID!, name: String!, price: Int! }
        type Query { product(id: ID!): Product }`),
      resolvers: {
        Product: {
          __resolveReference: (reference: { id: string }) => ({
            id: reference.id,
            name: `p${(resolved++, reference.id)}`,
            price: 1,
          }),
        },
      } as never,
    });
    const type = schema.getType('Product') as GraphQLObjectType;
    (type as { extensions: unknown }).extensions = {
      ...type.extensions,
      directives: [{ name: 'cached', args: { ttl: 60, tags: ['Product:{id}'] } }],
    };
    cachedDirectiveTransformer(schema, { cache });
    await Promise.all(Array.from({ length: 10 }, () => entities(schema, representations(20))));
    expect(resolved).toBe(PRODUCTS);
  });

  describe('build errors name the type', () => {
    const sdl = (type: string) =>
      parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${cachedDirectiveTypeDefs}
      ${type}
      type Query { product(id: ID!): Product }`);

    it.each([
      [
        'type Product @cached(ttl: 60) { id: ID!, name: String! }',
        { Product: { __resolveReference: () => null } },
        {},
        "@cached on the type Product: on a type, @cached caches a Federation entity's reference resolution (__resolveReference) and needs @key",
      ],
      [
        'type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, name: String! }',
        {},
        {},
        '@cached on the type Product: it has no __resolveReference to cache',
      ],
      [
        'type Product @key(fields: "id") @cached(ttl: 60, scope: PRIVATE) { id: ID!, name: String! }',
        { Product: { __resolveReference: () => null } },
        {},
        '@cached(scope: PRIVATE) on the type Product needs the "sessionId" option',
      ],
      [
        'type Product @key(fields: "id") @cached(ttl: 60, tags: ["P:{args.id}"]) { id: ID!, name: String! }',
        { Product: { __resolveReference: () => null } },
        {},
        '@cached(tags:) on Product.__resolveReference',
      ],
      [
        'type Product @key(fields: "id") @cached(ttl: 0) { id: ID!, name: String! }',
        { Product: { __resolveReference: () => null } },
        {},
        '@cached(ttl:) on Product must be a positive integer number of seconds, got 0',
      ],
    ])('%s', (type, resolvers, options, message) => {
      const schema = buildSubgraphSchema({ typeDefs: sdl(type), resolvers: resolvers as never });
      expect(() => cachedDirectiveTransformer(schema, { cache: createCache(), ...options })).toThrow(message);
    });

    it('a schema transformed twice', () => {
      const schema = buildSubgraphSchema({
        typeDefs: sdl('type Product @key(fields: "id") @cached(ttl: 60) { id: ID! }'),
        resolvers: { Product: { __resolveReference: () => null } } as never,
      });
      cachedDirectiveTransformer(schema, { cache: createCache() });
      expect(() => cachedDirectiveTransformer(schema, { cache: createCache() })).toThrow(
        'Product.__resolveReference is already wrapped',
      );
    });
  });
});

describe('@cached entities across replicas sharing Redis', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connect();
  });
  afterAll(async () => {
    await client.quit();
  });

  /** countingStore, keeping the Redis store's tag versions (the counting wrapper has none). */
  function counted(prefix: string) {
    const inner = redisStore({ client, prefix });
    const counting = countingStore(inner);
    return {
      calls: counting.calls,
      store: {
        ...counting.store,
        invalidateTags: inner.invalidateTags.bind(inner),
        tagVersions: inner.tagVersions.bind(inner),
      },
    };
  }

  it('one cold _entities request (20 representations, 5 products): one store read (MGET) for the 5 keys; warm on another replica: one read, no resolution', async () => {
    const prefix = randomPrefix('entities-mget');
    const counting = counted(prefix);
    const cache = createCache({ store: counting.store });
    const { schema, calls } = productsSchema(cache);
    await entities(schema, representations(20), herdcacheContext({ cache }));
    expect(calls.resolveReference).toBe(PRODUCTS);
    expect(counting.calls.getMany).toBe(1);
    expect(counting.calls.getManyKeys[0]).toHaveLength(PRODUCTS);
    // Another replica, warm: one read, no reference resolution.
    const other = counted(prefix);
    const otherCache = createCache({ store: other.store });
    const second = productsSchema(otherCache);
    await entities(second.schema, representations(20), herdcacheContext({ cache: otherCache }));
    expect(second.calls.resolveReference).toBe(0);
    expect(other.calls.getMany).toBe(1);
  });

  it('two subgraph replicas, 20 concurrent _entities requests each (20 representations over 5 products): 5 __resolveReference calls fleet-wide', async () => {
    const prefix = randomPrefix('entities');
    const replicas = [0, 1].map(() => {
      const cache = createCache({
        // A patient timeout: on a starved machine (two CPU hogs) a call timed out at the default
        // 250 ms and its replica filled without the lock (degradation, not what this counts).
        store: redisStore({ client, prefix, commandTimeout: 10_000 }),
        lockPollInterval: 5,
        lockWaitTimeout: 10_000,
      });
      return { cache, ...productsSchema(cache) };
    });
    await Promise.all(
      replicas.flatMap((replica) =>
        Array.from({ length: 20 }, () =>
          entities(replica.schema, representations(20), herdcacheContext({ cache: replica.cache })),
        ),
      ),
    );
    expect(replicas[0]!.calls.resolveReference + replicas[1]!.calls.resolveReference).toBe(PRODUCTS);
    // A mutation on one replica invalidates on every replica (tag versions live in Redis).
    await replicas[0]!.cache.invalidateTags(['Product:4']);
    const fresh = await entities(replicas[1]!.schema, representations(5));
    expect(fresh).toHaveLength(5);
    expect(replicas[0]!.calls.resolveReference + replicas[1]!.calls.resolveReference).toBe(PRODUCTS + 1);
  });
});

/**
 * The application's callbacks that answer synchronously, given as async functions that reject (an
 * auth lookup that fails): the rejection is observed, never left unhandled (fatal under Node's
 * default: one request would end the server), and the request or field is answered, without the
 * cache where the answer was needed. Also: a `identity` function or a reference's `sessionId` that
 * throws bypasses the call, never fails it.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { cacheReport, cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../src/graphql';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import { captureWarnings, rejecting, watchUnhandledRejections } from '../helpers';
import { makeSchema, run } from './fixtures';
import { post, responseFixture } from './response-fixture';

captureWarnings();

const { unhandled, settled: settle } = watchUnhandledRejections();

describe('response layer over HTTP (Apollo 5)', () => {
  it.each<[string, ResponseCacheOptions<{ session?: string }>, string, string]>([
    ['sessionId', { sessionId: rejecting('sessionId') as never }, '{ me { id } }', 'session_failed'],
    ['vary', { vary: rejecting('vary') as never }, '{ products { id } }', 'vary_failed'],
    ['enabled', { enabled: rejecting('enabled') as never }, '{ products { id } }', 'enabled_failed'],
  ])('an async %s that rejects: answered (200), bypassed, the server lives', async (_label, options, query, reason) => {
    const f = responseFixture();
    const server = new ApolloServer({
      schema: f.schema,
      plugins: [herdcachePlugin({ cache: f.cache, extensions: true, responseCache: options })],
    });
    const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await post(url, query);
        expect(r.status).toBe(200);
        expect(r.body.errors).toBeUndefined();
        expect(r.body.extensions?.cache).toMatchObject({ response: 'bypassed', bypassReason: reason });
      }
      await settle();
      expect(unhandled()).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});

describe('@cached transform', () => {
  it('an async sessionId that rejects: the PRIVATE field is resolved without the cache', async () => {
    const cache = createCache({ ttl: Infinity });
    const schema = makeSchema('type Query { me: String @cached(ttl: 60, scope: PRIVATE) }', {
      Query: { me: () => 'me' },
    });
    cachedDirectiveTransformer(schema, { cache, sessionId: rejecting('sessionId') as never });
    const context = herdcacheContext({ cache });
    expect((await run(schema, '{ me }', context)).data).toEqual({ me: 'me' });
    expect(cacheReport(context)!.sources['Query.me']).toMatchObject({ bypassed: 1 });
    await settle();
    expect(unhandled()).toEqual([]);
  });

  it.each<[string, (parent: { id: string }) => unknown]>([
    [
      'throws',
      () => {
        throw new Error('no identity');
      },
    ],
    ['rejects', rejecting('identity')],
  ])(
    'an identity function that %s: the call is resolved without the cache (no_identity), not failed',
    async (_l, id) => {
      const cache = createCache({ ttl: Infinity });
      let calls = 0;
      const schema = makeSchema('type Query { item: Item } type Item { id: ID! detail: String @cached(ttl: 60) }', {
        Query: { item: () => ({ id: '1' }) },
        Item: { detail: () => `detail ${++calls}` },
      });
      const bypassed: string[] = [];
      cachedDirectiveTransformer(schema, {
        cache,
        identity: { Item: id },
        onBypass: (coordinate, reason) => bypassed.push(`${coordinate} ${reason}`),
      });
      for (let i = 1; i <= 2; i++) {
        const result = await run(schema, '{ item { detail } }', herdcacheContext({ cache }));
        expect(result.errors).toBeUndefined();
        expect(result.data).toEqual({ item: { detail: `detail ${i}` } });
      }
      expect(bypassed).toEqual(['Item.detail no_identity', 'Item.detail no_identity']);
      await settle();
      expect(unhandled()).toEqual([]);
    },
  );

  it.each<[string, () => unknown]>([
    [
      'throws',
      () => {
        throw new Error('observer down');
      },
    ],
    ['rejects', rejecting('onBypass')],
  ])('an onBypass that %s never fails the field', async (_l, onBypass) => {
    const cache = createCache({ ttl: Infinity });
    const schema = makeSchema('type Query { me: String @cached(ttl: 60, scope: PRIVATE) }', {
      Query: { me: () => 'me' },
    });
    cachedDirectiveTransformer(schema, { cache, sessionId: () => null, onBypass });
    const result = await run(schema, '{ me }', herdcacheContext({ cache }));
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ me: 'me' });
    await settle();
    expect(unhandled()).toEqual([]);
  });

  it('an onInvalidationError that rejects never fails the mutation', async () => {
    const cache = createCache({ ttl: Infinity });
    const schema = makeSchema(
      'type Query { a: Int } type Mutation { touch(id: ID): Int @invalidates(tags: ["T:{args.id}"]) }',
      { Mutation: { touch: () => 1 } },
    );
    let reported = 0;
    const onInvalidationError = (() => {
      reported++;
      return rejecting('onInvalidationError')();
    }) as () => void;
    cachedDirectiveTransformer(schema, { cache, onInvalidationError });
    // No id: the tag has no value, which is reported to onInvalidationError.
    const result = await run(schema, 'mutation { touch }', herdcacheContext({ cache }));
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ touch: 1 });
    expect(reported).toBe(1);
    await settle();
    expect(unhandled()).toEqual([]);
  });

  it("a Federation reference's sessionId that throws or rejects: the entity is resolved without the cache", async () => {
    for (const sessionId of [
      () => {
        throw new Error('no token');
      },
      rejecting('sessionId'),
    ]) {
      const cache = createCache({ ttl: Infinity });
      let calls = 0;
      const schema = buildSubgraphSchema({
        typeDefs: parse(`
          extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
          ${cachedDirectiveTypeDefs}
          type Query { a: Int }
          type User @key(fields: "id") @cached(ttl: 60, scope: PRIVATE) { id: ID! name: String }
        `),
        resolvers: { User: { __resolveReference: ({ id }: { id: string }) => ({ id, name: `u${++calls}` }) } } as never,
      });
      cachedDirectiveTransformer(schema, { cache, sessionId: sessionId as never });
      const query = '{ _entities(representations: [{ __typename: "User", id: "1" }]) { ... on User { name } } }';
      for (let i = 1; i <= 2; i++) {
        const result = await run(schema, query, herdcacheContext({ cache }));
        expect(result.errors).toBeUndefined();
        expect(result.data).toEqual({ _entities: [{ name: `u${i}` }] });
      }
    }
    await settle();
    expect(unhandled()).toEqual([]);
  });
});

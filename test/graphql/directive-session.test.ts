/**
 * The @cached transform's `sessionId` at request time: an answer that can be no session by mistake
 * (a Promise from an async function, as Apollo's response cache plugin takes one; an object) keeps
 * the PRIVATE field or entity resolved without the cache (no_session), and is warned of once per
 * transform (HERDCACHE_SESSION_ID), naming the option and what it answered. null, undefined, "" and
 * false are no session on purpose: silent.
 */
import { parse } from 'graphql';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { createCache } from '../../src/core/cache';
import {
  cacheReport,
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  cachedFieldKey,
  herdcacheContext,
} from '../../src/graphql';
import { makeSchema, run } from './fixtures';
import { captureWarnings } from '../helpers';

const warnings = captureWarnings();

describe('@cached transform: sessionId', () => {
  const privateDefs = 'type Query { me: String @cached(ttl: 60, scope: PRIVATE) }';

  it.each<[string, number | bigint | string]>([
    ['a number', 7],
    ['a bigint', 7n],
    ['a string', '7'],
  ])(
    'cachedFieldKey with the session as %s: the key the directive uses (its invalidation reaches it)',
    async (_l, session) => {
      const cache = createCache({ ttl: Infinity });
      let calls = 0;
      const schema = makeSchema(privateDefs, { Query: { me: () => ++calls } });
      cachedDirectiveTransformer(schema, { cache, sessionId: () => 7 });
      const me = async () => (await run(schema, '{ me }', herdcacheContext({ cache }))).data;
      expect(await me()).toEqual({ me: '1' });
      expect(await me()).toEqual({ me: '1' });
      await cache.invalidate(cachedFieldKey('Query.me', { session }));
      expect(await me()).toEqual({ me: '2' });
    },
  );

  it.each<[string, object, RegExp]>([
    ['session: {}', { session: {} }, /"session".*object/],
    ['session: true', { session: true }, /"session".*true/],
    ['session: NaN', { session: NaN }, /"session".*NaN/],
    ['session: ""', { session: '' }, /"session"/],
    ['keyPrefix: 5', { keyPrefix: 5 }, /"keyPrefix".*5/],
    ['keyPrefix: null', { keyPrefix: null }, /"keyPrefix".*null/],
    ['args: "x"', { args: 'x' }, /"args".*x/],
    ['args: null', { args: null }, /"args".*null/],
    ['args: []', { args: [] }, /"args"/],
  ])(
    'cachedFieldKey refuses %s, naming it (a key the directive never builds would invalidate nothing)',
    (_l, options, message) => {
      let error: unknown;
      try {
        cachedFieldKey('Query.me', options as never);
      } catch (e) {
        error = e;
      }
      expect(error).toMatchObject({ code: 'E_INVALID_OPTION' });
      expect((error as Error).message).toMatch(message);
    },
  );

  it.each<[string, (ctx: { user: string }) => unknown, RegExp]>([
    ['async', async (ctx) => ctx.user, /returned a Promise: it must return the session id synchronously/],
    ['an object', (ctx) => ({ id: ctx.user }), /returned object \[object Object\]/],
    ['NaN', () => NaN, /returned NaN/],
    ['Infinity', () => Infinity, /returned Infinity/],
    ['true', () => true, /returned true/],
    ['a symbol', () => Symbol('user'), /returned Symbol\(user\)/],
  ])(
    '%s: the PRIVATE field is resolved without the cache (no_session), warned of once',
    async (_label, sessionId, message) => {
      const cache = createCache({ ttl: Infinity });
      let calls = 0;
      const schema = makeSchema(privateDefs, {
        Query: { me: (_p, _a, ctx: { user: string }) => `${ctx.user}:${++calls}` },
      });
      const bypassed: string[] = [];
      cachedDirectiveTransformer(schema, {
        cache,
        sessionId: sessionId as (ctx: { user: string }) => string,
        onBypass: (coordinate, reason) => bypassed.push(`${coordinate} ${reason}`),
      });
      const context = { ...herdcacheContext({ cache }), user: 'a' };
      expect((await run(schema, '{ me }', context)).data).toEqual({ me: 'a:1' });
      expect((await run(schema, '{ me }', { ...herdcacheContext({ cache }), user: 'a' })).data).toEqual({ me: 'a:2' });
      expect(bypassed).toEqual(['Query.me no_session', 'Query.me no_session']);
      expect(cacheReport(context)!.sources['Query.me']).toMatchObject({ bypassed: 1, hits: 0, misses: 0 });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.code).toBe('HERDCACHE_SESSION_ID');
      expect(warnings[0]!.message).toContain('option "sessionId" of cachedDirectiveTransformer()');
      expect(warnings[0]!.message).toMatch(message);
    },
  );

  it('null, undefined, "" and false: no session, silent', async () => {
    const cache = createCache({ ttl: Infinity });
    const schema = makeSchema(privateDefs, { Query: { me: () => 'x' } });
    cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { user: unknown }) => ctx.user as string });
    for (const none of [null, undefined, '', false]) {
      const context = { ...herdcacheContext({ cache }), user: none };
      await run(schema, '{ me }', context);
      expect(cacheReport(context)!.sources['Query.me']).toMatchObject({ bypassed: 1 });
    }
    expect(warnings).toEqual([]);
  });

  it('a PRIVATE entity (__resolveReference) with an async sessionId: resolved without the cache, warned of once', async () => {
    const cache = createCache({ ttl: Infinity });
    let calls = 0;
    const schema = buildSubgraphSchema({
      typeDefs: parse(`
        extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        ${cachedDirectiveTypeDefs}
        type Product @key(fields: "id") @cached(ttl: 60, scope: PRIVATE) { id: ID!, name: String! }
        type Query { product(id: ID!): Product }
      `),
      resolvers: {
        Product: { __resolveReference: (ref: { id: string }) => ({ id: ref.id, name: `p${++calls}` }) },
      } as never,
    });
    const bypassed: string[] = [];
    cachedDirectiveTransformer(schema, {
      cache,
      sessionId: (async () => 'a') as never,
      onBypass: (coordinate, reason) => bypassed.push(`${coordinate} ${reason}`),
    });
    const source = '{ _entities(representations: [{ __typename: "Product", id: "1" }]) { ... on Product { name } } }';
    for (let i = 0; i < 2; i++) {
      const result = await run(schema, source, herdcacheContext({ cache }));
      expect(result.errors).toBeUndefined();
    }
    expect(calls).toBe(2);
    expect(bypassed).toEqual(['Product.__resolveReference no_session', 'Product.__resolveReference no_session']);
    expect(warnings.map((w) => w.code)).toEqual(['HERDCACHE_SESSION_ID']);
    expect(warnings[0]!.message).toContain('"sessionId" of cachedDirectiveTransformer() returned a Promise');
  });
});

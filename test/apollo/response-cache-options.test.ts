/**
 * The response layer's options meeting Apollo Server 5 over HTTP: callbacks that throw or answer
 * something unusable never fail a request (bypassed, warned of once), `defaultMaxAge` without
 * Apollo's cache-control plugin given the same value (warned of once: HERDCACHE_APOLLO_DEFAULT_MAX_AGE),
 * and a mutation's `cache-control` (no-store, as on Yoga).
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { createCache } from '../../src/core/cache';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import { makeSchema } from '../graphql/fixtures';
import { post, responseFixture } from '../graphql/response-fixture';
import { captureWarnings } from '../helpers';
import { serveApollo } from './serve';

const serve = (
  schema: ReturnType<typeof makeSchema>,
  responseCache: ResponseCacheOptions,
  plugins: ApolloServerPlugin[] = [],
) => serveApollo(schema, createCache(), responseCache, plugins);

const warnings = captureWarnings();

describe('Apollo: callbacks that throw or answer something unusable', () => {
  it.each<[string, ResponseCacheOptions, string, string]>([
    ['vary returns an object', { vary: () => ({ l: 'fr' }) as never }, '{ products { id } }', 'vary_failed'],
    [
      'vary throws',
      {
        vary: () => {
          throw new Error('no locale');
        },
      },
      '{ products { id } }',
      'vary_failed',
    ],
    [
      'sessionId throws',
      {
        sessionId: () => {
          throw new Error('bad token');
        },
      },
      '{ me { id } }',
      'session_failed',
    ],
    ['sessionId is async', { sessionId: (async () => 'a') as never }, '{ me { id } }', 'session_failed'],
  ])(
    '%s: answered (200, executed), bypassed with its reason, warned of once',
    async (_label, options, query, reason) => {
      const f = responseFixture();
      const { url, stop } = await serve(f.schema, options);
      try {
        for (let i = 0; i < 2; i++) {
          const r = await post(url, query, { session: 'a' });
          expect(r.status).toBe(200);
          expect(r.body.errors).toBeUndefined();
          expect(r.body.data).toBeDefined();
          expect(r.body.extensions?.cache).toMatchObject({ response: 'bypassed', bypassReason: reason });
        }
        expect(warnings).toHaveLength(1);
        expect(warnings[0]!.code).toMatch(/^HERDCACHE_(VARY|SESSION_ID)$/);
      } finally {
        await stop();
      }
    },
  );
});

const plainDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { a: Int, zero: Int, private: Int, hinted: Int @cacheControl(maxAge: 30) }
  type Mutation { rename(id: ID!): Item }
  type Item @cacheControl(maxAge: 60) { id: ID!, name: String }
`;

function plainSchema(calls: Record<string, number>) {
  const count = (name: string) => (calls[name] = (calls[name] ?? 0) + 1);
  const setCacheHint = (info: unknown, hint: object) =>
    (info as { cacheControl: { setCacheHint(h: object): void } }).cacheControl.setCacheHint(hint);
  return makeSchema(plainDefs, {
    Query: {
      a: () => count('a'),
      zero: (_p, _a, _c, info) => {
        setCacheHint(info, { maxAge: 0 });
        return count('zero');
      },
      private: (_p, _a, _c, info) => {
        setCacheHint(info, { scope: 'PRIVATE' });
        return count('private');
      },
      hinted: () => count('hinted'),
    },
    Mutation: { rename: (_p, { id }) => ({ id, name: 'renamed' }) },
  });
}

describe('Apollo: responseCache.defaultMaxAge and Apollo cache-control defaultMaxAge', () => {
  it('without ApolloServerPluginCacheControl({ defaultMaxAge }): not stored, and warned of once, naming the fix', async () => {
    const calls: Record<string, number> = {};
    const { url, stop } = await serve(plainSchema(calls), { defaultMaxAge: 60 });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await post(url, '{ a }');
        expect(r.body.extensions?.cache).toMatchObject({ response: 'miss', notStoredReason: 'stricter_hint' });
        expect(r.headers.get('cache-control')).toBe('no-store');
      }
      expect(calls.a).toBe(3);
      // A hint of its own on every field: the default plays no part, and Apollo agrees.
      await post(url, '{ hinted }');
      expect((await post(url, '{ hinted }')).body.extensions?.cache?.response).toBe('hit');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.code).toBe('HERDCACHE_APOLLO_DEFAULT_MAX_AGE');
      expect(warnings[0]!.message).toContain('"responseCache.defaultMaxAge" is 60');
      expect(warnings[0]!.message).toContain('ApolloServerPluginCacheControl({ defaultMaxAge: 60 })');
    } finally {
      await stop();
    }
  });

  it('with it: stored, silently; a resolver that sets PRIVATE or maxAge 0 still keeps its result from being stored', async () => {
    const calls: Record<string, number> = {};
    const { url, stop } = await serve(plainSchema(calls), { defaultMaxAge: 60 }, [
      ApolloServerPluginCacheControl({ defaultMaxAge: 60 }),
    ]);
    try {
      expect((await post(url, '{ a }')).body.extensions?.cache).toEqual(expect.objectContaining({ response: 'miss' }));
      const hit = await post(url, '{ a }');
      expect(hit.body.extensions?.cache?.response).toBe('hit');
      expect(hit.headers.get('cache-control')).toBe('max-age=60, public');
      const notStored = async (query: string) => {
        for (let i = 0; i < 2; i++) {
          const r = await post(url, query);
          expect(r.body.extensions?.cache).toMatchObject({ response: 'miss', notStoredReason: 'stricter_hint' });
        }
      };
      await notStored('{ private }');
      expect(warnings).toEqual([]);
      // A dynamic maxAge 0 where a field takes the default cannot be told apart from Apollo's own
      // default of 0 (its policy is the smallest of its fields'): it may be warned of, never stored.
      await notStored('{ zero }');
      expect(calls).toEqual({ a: 1, zero: 2, private: 2 });
    } finally {
      await stop();
    }
  });
});

describe('Apollo: a mutation is no-store', () => {
  it('even when its result type has @cacheControl(maxAge: 60)', async () => {
    const { url, stop } = await serve(plainSchema({}), {});
    try {
      const r = await post(url, 'mutation { rename(id: "1") { id name } }');
      expect(r.body.data).toEqual({ rename: { id: '1', name: 'renamed' } });
      expect(r.headers.get('cache-control')).toBe('no-store');
      // A query of that type is cacheable (the header is written from the policy as before).
      expect((await post(url, '{ hinted }')).headers.get('cache-control')).toBe('max-age=30, public');
    } finally {
      await stop();
    }
  });
});

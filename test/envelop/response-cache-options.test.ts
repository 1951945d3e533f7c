/**
 * The response layer's callbacks meeting GraphQL Yoga 5 over HTTP: a `vary` or `sessionId` that
 * throws or answers something unusable never fails a request (it is executed, bypassed with its
 * reason) and is warned of once, as on Apollo (test/apollo/response-cache-options).
 */
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import { post, responseFixture } from '../graphql/response-fixture';
import { captureWarnings } from '../helpers';
import { serveYoga } from './serve';

const serve = (responseCache: ResponseCacheOptions) => serveYoga(responseFixture(), responseCache);

const warnings = captureWarnings();

it.each<[string, ResponseCacheOptions, string, string, string]>([
  [
    'vary returns an object',
    { vary: () => ({ l: 'fr' }) as never },
    '{ products { id } }',
    'vary_failed',
    'HERDCACHE_VARY',
  ],
  [
    'vary throws',
    {
      vary: () => {
        throw new Error('no locale');
      },
    },
    '{ products { id } }',
    'vary_failed',
    'HERDCACHE_VARY',
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
    'HERDCACHE_SESSION_ID',
  ],
  [
    'sessionId is async',
    { sessionId: (async () => 'a') as never },
    '{ me { id } }',
    'session_failed',
    'HERDCACHE_SESSION_ID',
  ],
])(
  '%s: answered (200, executed), bypassed with its reason, warned of once',
  async (_label, options, query, reason, code) => {
    const { url, stop } = await serve(options);
    try {
      for (let i = 0; i < 2; i++) {
        const r = await post(url, query, { session: 'a' });
        expect(r.status).toBe(200);
        expect(r.body.errors).toBeUndefined();
        expect(r.body.data).toBeDefined();
        expect(r.body.extensions?.cache).toMatchObject({ response: 'bypassed', bypassReason: reason });
      }
      expect(warnings.map((w) => w.code)).toEqual([code]);
    } finally {
      await stop();
    }
  },
);

describe('a PUBLIC field with a PRIVATE runtime hint for signed-in viewers (docs/response-cache.md, Runtime hints)', () => {
  // recommendations: @cacheControl(maxAge: 60); hints PRIVATE for a signed-in viewer, answers `picked for <session>`.
  it.each<[string, Parameters<typeof serve>[0]]>([
    [
      'with sessionId (signed-in and anonymous requests keyed apart, as by Apollo)',
      { sessionId: (ctx) => ctx.session },
    ],
    [
      'with vary on being signed in',
      { vary: (ctx: { session?: string }) => (ctx.session === undefined ? 'anonymous' : 'signed-in') },
    ],
  ])('%s: anonymous viewers share the stored answer, each signed-in viewer gets its own', async (_label, options) => {
    const { url, stop } = await serve(options);
    try {
      expect((await post(url, '{ recommendations }')).body.data).toEqual({ recommendations: 'popular' });
      expect((await post(url, '{ recommendations }')).body.extensions?.cache?.response).toBe('hit');
      for (const session of ['a', 'b', 'a']) {
        const r = await post(url, '{ recommendations }', { session });
        expect(r.body.data).toEqual({ recommendations: `picked for ${session}` });
        expect(r.body.extensions?.cache).toMatchObject({ response: 'miss', notStoredReason: 'stricter_hint' });
        expect(r.headers.get('cache-control')).toBe('max-age=60, private');
      }
      expect((await post(url, '{ recommendations }')).body.extensions?.cache?.response).toBe('hit');
    } finally {
      await stop();
    }
  });

  it('without sessionId: no request is known to be signed in, so once an anonymous answer is stored a signed-in viewer is given it', async () => {
    const { url, stop } = await serve({});
    try {
      expect((await post(url, '{ recommendations }')).body.data).toEqual({ recommendations: 'popular' });
      const signedIn = await post(url, '{ recommendations }', { session: 'a' });
      expect(signedIn.body.extensions?.cache?.response).toBe('hit');
      expect(signedIn.body.data).toEqual({ recommendations: 'popular' });
    } finally {
      await stop();
    }
  });
});

/**
 * The response layer's options meeting Apollo Server 5 over HTTP: callbacks that throw or answer
 * something unusable never fail a request (bypassed, warned of once).
 */
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import type { makeSchema } from '../graphql/fixtures';
import { post, responseFixture } from '../graphql/response-fixture';

async function serve(
  schema: ReturnType<typeof makeSchema>,
  responseCache: ResponseCacheOptions,
  plugins: ApolloServerPlugin[] = [],
) {
  const cache = createCache();
  const server = new ApolloServer({
    schema,
    plugins: [herdcachePlugin({ cache, extensions: true, responseCache }), ...plugins],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) =>
      typeof req.headers['x-session'] === 'string' ? { session: req.headers['x-session'] } : {},
  });
  return { url, stop: () => server.stop() };
}

let warnings: { message: string; code: string | undefined }[];
let spy: jest.SpyInstance;
beforeEach(() => {
  warnings = [];
  spy = jest.spyOn(process, 'emitWarning').mockImplementation(((warning: string | Error, options?: unknown) => {
    const code = typeof options === 'object' && options !== null ? (options as { code?: string }).code : undefined;
    warnings.push({ message: String(warning), code });
  }) as typeof process.emitWarning);
});
afterEach(() => spy.mockRestore());

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
    ['sessionId is async', { sessionId: (async () => 'a') as never }, '{ me { id } }', 'no_session'],
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

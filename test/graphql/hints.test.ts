/**
 * @cached in Apollo's cache-control, checked on the HTTP `cache-control` header of a real server
 * (startStandaloneServer on 127.0.0.1): a PRIVATE cached field makes the response private; a
 * cached field's maxAge never exceeds its ttl; nothing becomes cacheable that was not.
 */
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { startStandaloneServer } from '@apollo/server/standalone';
import { createCache } from '../../src/core';
import { cachedDirectiveTransformer } from '../../src/graphql';
import { makeSchema } from './fixtures';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION

  type Query {
    mine: Secret @cached(ttl: 60, scope: PRIVATE) @cacheControl(maxAge: 60)
    short: Int @cached(ttl: 10) @cacheControl(maxAge: 60)
    long: Int @cached(ttl: 120) @cacheControl(maxAge: 60)
    plain: Int @cacheControl(maxAge: 30)
    unhinted: Int @cached(ttl: 60)
    dynamic: Int @cached(ttl: 10)
    book: Book @cacheControl(maxAge: 300)
  }
  type Secret { owner: String }
  type Book { title: String @cacheControl(maxAge: 300), rating: Int @cached(ttl: 5) }
`;

async function start(
  plugins: ApolloServer['internals']['plugins'] = [],
): Promise<{ url: string; server: ApolloServer<{ session?: string }> }> {
  {
    const cache = createCache();
    const schema = makeSchema(typeDefs, {
      Query: {
        mine: (_p, _a, ctx) => ({ owner: ctx.session }),
        short: () => 1,
        long: () => 2,
        plain: () => 3,
        unhinted: () => 4,
        dynamic: (_p, _a, _c, info) => {
          (info as unknown as { cacheControl: { setCacheHint(h: object): void } }).cacheControl.setCacheHint({
            maxAge: 300,
          });
          return 6;
        },
        book: () => ({ id: '1', title: 'Kindred' }),
      },
      Book: { rating: () => 5 },
    });
    cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { session?: string }) => ctx.session });
    const server = new ApolloServer<{ session?: string }>({ schema, plugins });
    const { url } = await startStandaloneServer(server, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req }) => ({
        session: typeof req.headers['x-session'] === 'string' ? req.headers['x-session'] : undefined,
      }),
    });
    return { url, server };
  }
}

async function headerOf(url: string, query: string, session = 'alice'): Promise<string | null> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session': session },
    body: JSON.stringify({ query }),
  });
  const body = (await response.json()) as { errors?: unknown };
  expect(body.errors).toBeUndefined();
  return response.headers.get('cache-control');
}

describe('@cached and the cache-control header', () => {
  let url: string;
  let server: ApolloServer<{ session?: string }>;
  beforeAll(async () => ({ url, server } = await start()));
  afterAll(() => server.stop());
  const header = (query: string) => headerOf(url, query);

  it('a PRIVATE cached field makes the response private, on a miss and on a hit', async () => {
    expect(await header('{ mine { owner } }')).toBe('max-age=60, private');
    expect(await header('{ mine { owner } }')).toBe('max-age=60, private');
    expect(await header('{ mine { owner } plain }')).toBe('max-age=30, private');
  });

  it("a ttl smaller than maxAge caps maxAge; a larger one leaves it; a child's ttl caps its parent's response", async () => {
    expect(await header('{ short }')).toBe('max-age=10, public');
    expect(await header('{ short }')).toBe('max-age=10, public');
    expect(await header('{ long }')).toBe('max-age=60, public');
    expect(await header('{ long plain }')).toBe('max-age=30, public');
    expect(await header('{ book { title } }')).toBe('max-age=300, public');
    expect(await header('{ book { title rating } }')).toBe('max-age=5, public');
  });

  it("a resolver's setCacheHint maxAge on a cached field is capped at its ttl too", async () => {
    expect(await header('{ dynamic }')).toBe('max-age=10, public'); // the miss: the resolver ran
  });

  it('a cached field without a hint stays as uncacheable as the server default (maxAge 0) makes it', async () => {
    expect(await header('{ unhinted }')).toBe('no-store');
    expect(await header('{ unhinted plain }')).toBe('no-store');
  });
});

describe('with a server defaultMaxAge longer than the ttl', () => {
  it('the default is capped at the ttl for a cached field without a hint', async () => {
    const { url, server } = await start([ApolloServerPluginCacheControl({ defaultMaxAge: 300 })]);
    try {
      expect(await headerOf(url, '{ unhinted }')).toBe('max-age=60, public');
      expect(await headerOf(url, '{ plain }')).toBe('max-age=30, public');
      expect(await headerOf(url, '{ book { title } }')).toBe('max-age=300, public');
    } finally {
      await server.stop();
    }
  });
});

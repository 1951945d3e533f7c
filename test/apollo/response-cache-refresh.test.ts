/**
 * A background refresh (swr) runs the operation with the context of the request that was served
 * stale: a resolver's runtime hint there restricts what the refresh may store, as it does for any
 * execution. Found by test/stress/response-settle: a refresh by a signed-in viewer of a response
 * stored for an anonymous one stored the viewer's own answer as PUBLIC, served to everyone after.
 * Apollo 5 and Yoga 5 through setResponseCacheHint, and Apollo through its own
 * `info.cacheControl.setCacheHint` (the refresh runs apart from any request: it must still see it).
 */
import { ApolloServer } from '@apollo/server';
import type { GraphQLResolveInfo } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { herdcachePlugin } from '../../src/apollo';
import { createCache, manualClock } from '../../src/core';
import { useHerdcache } from '../../src/envelop';
import { cachedDirectiveTransformer, setResponseCacheHint } from '../../src/graphql';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { recs: String @cacheControl(maxAge: 10) }
`;
type Context = { session?: string };
type WithCacheControl = GraphQLResolveInfo & { cacheControl?: { setCacheHint(hint: { scope: 'PRIVATE' }): void } };
type Result = { data: { recs: string }; extensions: { cache: { response: string } } };

it.each(['apollo', 'apollo info.cacheControl', 'yoga'])(
  '%s: a refresh made PRIVATE by its runtime hint is not stored; the public answer stays',
  async (kind) => {
    const clock = manualClock();
    const cache = createCache({ clock });
    let executions = 0;
    const schema = makeSchema(typeDefs, {
      Query: {
        // Public for anonymous viewers; a signed-in viewer's own, made PRIVATE at run time.
        recs: (_p: unknown, _a: unknown, ctx: Context, info: GraphQLResolveInfo) => {
          executions++;
          if (ctx.session !== undefined) {
            if (kind === 'apollo info.cacheControl')
              (info as WithCacheControl).cacheControl?.setCacheHint({ scope: 'PRIVATE' });
            else setResponseCacheHint(ctx, { scope: 'PRIVATE' });
          }
          return `recs of ${ctx.session ?? 'anyone'}`;
        },
      },
    });
    // No sessionId: no request is known to be signed in, so alice's request is served the anonymous
    // answer and refreshes it (with sessionId her key is her own: see response-cache-session-mode).
    const responseCache = { swr: 60 };
    let ask: (session?: string) => Promise<Result>;
    let stop = async () => {};
    if (kind !== 'yoga') {
      const server = new ApolloServer<Context>({
        schema,
        plugins: [herdcachePlugin<Context>({ cache, extensions: true, responseCache })],
      });
      await server.start();
      ask = async (session) => {
        const response = await server.executeOperation(
          { query: '{ recs }' },
          { contextValue: session === undefined ? {} : { session } },
        );
        return (response.body as unknown as { singleResult: Result }).singleResult;
      };
      stop = () => server.stop();
    } else {
      const yoga = createYoga<Context>({
        schema,
        plugins: [useHerdcache<Context>({ cache, extensions: true, responseCache })],
        context: ({ request }) => {
          const session = request.headers.get('x-session');
          return session === null ? {} : { session };
        },
        logging: false,
      });
      ask = async (session) => {
        const headers = {
          'content-type': 'application/json',
          ...(session === undefined ? {} : { 'x-session': session }),
        };
        const response = await yoga.fetch('http://yoga/graphql', {
          method: 'POST',
          headers,
          body: JSON.stringify({ query: '{ recs }' }),
        });
        return (await response.json()) as Result;
      };
    }
    const seen = async (session?: string) => {
      const result = await ask(session);
      return `${result.data.recs} (${result.extensions.cache.response})`;
    };
    try {
      expect(await seen()).toBe('recs of anyone (miss)');
      clock.advance(11_000); // past maxAge, within swr
      expect(await seen('alice')).toBe('recs of anyone (stale)'); // and alice's request refreshes it
      await until(() => executions === 2 && cache.inFlight === 0, 'the refresh');
      // Not stored: still the public answer, whose next refresh (an anonymous request's) is stored.
      expect(await seen()).toBe('recs of anyone (stale)');
      await until(() => executions === 3 && cache.inFlight === 0, 'the second refresh');
      expect(await seen('bob')).toBe('recs of anyone (hit)');
    } finally {
      await stop();
      await cache.close();
    }
  },
);

it.each(['apollo', 'yoga'])(
  "%s: a refreshed response is tagged with its own @cached fields' tags: invalidating one makes it a miss",
  async (kind) => {
    const clock = manualClock();
    const cache = createCache({ clock });
    let version = 1;
    const schema = makeSchema(
      `${typeDefs.replace('type Query { recs: String @cacheControl(maxAge: 10) }', '')}
      type Query { recs: String @cacheControl(maxAge: 10) @cached(ttl: 600, tags: ["Recs"]) }`,
      { Query: { recs: () => `recs v${version}` } },
    );
    cachedDirectiveTransformer(schema, { cache });
    let ask: () => Promise<Result>;
    let stop = async () => {};
    if (kind === 'apollo') {
      const server = new ApolloServer({
        schema,
        plugins: [herdcachePlugin({ cache, extensions: true, responseCache: { swr: 60 } })],
      });
      await server.start();
      ask = async () => {
        const response = await server.executeOperation({ query: '{ recs }' });
        return (response.body as unknown as { singleResult: Result }).singleResult;
      };
      stop = () => server.stop();
    } else {
      const yoga = createYoga({
        schema,
        plugins: [useHerdcache({ cache, extensions: true, responseCache: { swr: 60 } })],
        logging: false,
      });
      ask = async () => {
        const response = await yoga.fetch('http://yoga/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ recs }' }),
        });
        return (await response.json()) as Result;
      };
    }
    const seen = async () => {
      const result = await ask();
      return `${result.data.recs} (${result.extensions.cache.response})`;
    };
    try {
      expect(await seen()).toBe('recs v1 (miss)');
      clock.advance(11_000); // the response is stale (the field's own value is not)
      expect(await seen()).toBe('recs v1 (stale)');
      await until(() => cache.inFlight === 0, 'the refresh');
      expect(await seen()).toBe('recs v1 (hit)'); // the refreshed response
      version = 2;
      await cache.invalidateTags(['Recs']); // the field's tag: the refreshed response holds it
      expect(await seen()).toBe('recs v2 (miss)');
    } finally {
      await stop();
      await cache.close();
    }
  },
);

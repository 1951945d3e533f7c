/**
 * On Apollo 5, a hook of another plugin that throws outside the execution itself (its
 * executionDidStart or executionDidEnd, or a responseForOperation listed after herdcachePlugin's)
 * makes Apollo answer 500 without calling willSendResponse, where herdcachePlugin hands an
 * execution over to the requests waiting on its key. It is now handed over as failed from
 * unexpectedErrorProcessingRequest. Before, the key stayed in flight for good: every later
 * request for that operation waited forever. Counted: every request answers, and executions.
 */
import { ApolloServer, HeaderMap, type ApolloServerPlugin } from '@apollo/server';
import { buildSchema } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';

type Hook = 'executionDidStart' | 'executionDidEnd' | 'responseForOperation';

/** A plugin, listed after herdcachePlugin, whose `hook` throws on its first request only. */
function failingOnce(hook: Hook): ApolloServerPlugin {
  let failed = false;
  const fail = () => {
    if (failed) return;
    failed = true;
    throw new Error('a flaky plugin');
  };
  return {
    async requestDidStart() {
      if (hook === 'responseForOperation')
        return {
          async responseForOperation() {
            fail();
            return null;
          },
        };
      if (hook === 'executionDidEnd')
        return {
          async executionDidStart() {
            return {
              async executionDidEnd() {
                fail();
              },
            };
          },
        };
      return {
        async executionDidStart() {
          fail();
        },
      };
    },
  };
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

it.each<Hook>(['executionDidStart', 'executionDidEnd', 'responseForOperation'])(
  'a plugin whose %s throws once: that request fails (500), the next ones for the same operation answer',
  async (hook) => {
    const schema = buildSchema(`
      directive @cacheControl(maxAge: Int) on FIELD_DEFINITION
      type Query { hello: String @cacheControl(maxAge: 60) }
    `);
    let executions = 0;
    schema.getQueryType()!.getFields().hello!.resolve = async () => {
      executions++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return 'hi';
    };
    const cache = createCache();
    const server = new ApolloServer({
      schema,
      logger: silent,
      plugins: [herdcachePlugin({ cache, extensions: true, responseCache: true }), failingOnce(hook)],
    });
    await server.start();
    const ask = async () => {
      const response = await server.executeHTTPGraphQLRequest({
        httpGraphQLRequest: {
          method: 'POST',
          headers: new HeaderMap([['content-type', 'application/json']]),
          body: { query: '{ hello }' },
          search: '',
        },
        context: async () => ({}),
      });
      return response.status ?? 200;
    };
    let watchdog: NodeJS.Timeout | undefined;
    const bounded = <T>(work: Promise<T>) =>
      Promise.race([
        work,
        new Promise<'pending'>((resolve) => {
          watchdog = setTimeout(() => resolve('pending'), 5000);
        }),
      ]).finally(() => clearTimeout(watchdog));
    try {
      expect(await bounded(ask())).toBe(500);
      const later = await bounded(Promise.all(Array.from({ length: 5 }, ask)));
      expect(later).toEqual([200, 200, 200, 200, 200]);
      // The first request executed only when the throw came after its execution; then one
      // execution for the five (they share it), then hits.
      const expected = hook === 'executionDidEnd' ? 2 : 1;
      expect(executions).toBe(expected);
      expect(await bounded(ask())).toBe(200);
      expect(executions).toBe(expected);
    } finally {
      await server.stop();
      await cache.close();
    }
  },
  15_000,
);

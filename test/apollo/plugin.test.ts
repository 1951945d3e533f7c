/** herdcachePlugin with a real ApolloServer through executeOperation. */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { herdcacheContext, requestScope } from '../../src/graphql';
import { fixture, reportOf, single, zeros } from './fixtures';

describe('herdcachePlugin: response.extensions.cache', () => {
  it('reports per source (field coordinate, loader name) and in total', async () => {
    const { server, context, counter } = fixture({ extensions: true });
    await server.start();
    try {
      const query = '{ user(id: "2") { name score } users(ids: ["2", "3"]) { score } }';
      const first = single(await server.executeOperation({ query }, { contextValue: context() }));
      expect(first.errors).toBeUndefined();
      expect(first.data).toEqual({ user: { name: 'user 2', score: 20 }, users: [{ score: 20 }, { score: 30 }] });
      expect(reportOf(first)).toEqual({
        // "2" is asked for twice in this operation: once through the registry, once from the request memo.
        total: { ...zeros(), misses: 4, fills: 4 },
        sources: {
          user: { ...zeros(), misses: 2, fills: 2 },
          'User.score': { ...zeros(), misses: 2, fills: 2 },
        },
      });
      const second = single(await server.executeOperation({ query }, { contextValue: context() }));
      expect(reportOf(second)).toEqual({
        total: { ...zeros(), hits: 4 },
        sources: { user: { ...zeros(), hits: 2 }, 'User.score': { ...zeros(), hits: 2 } },
      });
      expect(counter.calls).toEqual({ 'user.batch': 1, 'score:2': 1, 'score:3': 1 });
    } finally {
      await server.stop();
    }
  });

  it('gives the directive a request scope when the context has none, fresh for every operation', async () => {
    const { server, counter } = fixture({ extensions: true });
    await server.start();
    try {
      const contextValue = {}; // reused on purpose: a scope kept on it would answer the second operation from its memo
      const first = single(await server.executeOperation({ query: '{ hot { value } }' }, { contextValue }));
      expect(reportOf(first).sources).toEqual({ 'Query.hot': { ...zeros(), misses: 1, fills: 1 } });
      expect(requestScope(contextValue)).toBeUndefined(); // detached once the response left
      const second = single(await server.executeOperation({ query: '{ hot { value } }' }, { contextValue }));
      expect(reportOf(second).sources).toEqual({ 'Query.hot': { ...zeros(), hits: 1 } });
      expect(counter.calls.hot).toBe(1);
    } finally {
      await server.stop();
    }
  });

  it('GraphQLErrors from a @cached resolver reach the client with their extensions, and are not cached', async () => {
    const { server, counter } = fixture({ extensions: true });
    await server.start();
    try {
      for (let i = 1; i <= 3; i++) {
        const result = single(
          await server.executeOperation({ query: '{ fail(code: "TEAPOT") }' }, { contextValue: {} }),
        );
        expect(result.data).toEqual({ fail: null });
        expect(result.errors).toHaveLength(1);
        expect(result.errors![0]).toMatchObject({
          message: 'failed with TEAPOT',
          path: ['fail'],
          extensions: { code: 'TEAPOT', retryable: false },
        });
        expect(reportOf(result).sources['Query.fail']).toEqual({ ...zeros(), misses: 1, fillFailures: 1 });
        expect(counter.calls.fail).toBe(i);
      }
    } finally {
      await server.stop();
    }
  });

  it('no extension for a request that did not execute (parse or validation error)', async () => {
    const { server } = fixture({ extensions: true });
    await server.start();
    try {
      const parse = single(await server.executeOperation({ query: '{ hot { ' }, { contextValue: {} }));
      expect(parse.errors).toBeDefined();
      expect(parse.extensions?.cache).toBeUndefined();
      const invalid = single(await server.executeOperation({ query: '{ nope }' }, { contextValue: {} }));
      expect(invalid.errors).toBeDefined();
      expect(invalid.extensions?.cache).toBeUndefined();
    } finally {
      await server.stop();
    }
  });

  it('refuses a context made for another cache (every request fails, the reason is logged)', async () => {
    const cache = createCache({ ttl: Infinity });
    const logged: string[] = [];
    const log = (message: unknown) => logged.push(String(message));
    const server = new ApolloServer({
      typeDefs: 'type Query { a: Int }',
      resolvers: { Query: { a: () => 1 } },
      plugins: [herdcachePlugin({ cache })],
      logger: { debug() {}, info() {}, warn: log, error: log },
    });
    await server.start();
    try {
      const other = herdcacheContext({ cache: createCache({ ttl: Infinity }) });
      await expect(server.executeOperation({ query: '{ a }' }, { contextValue: other })).rejects.toThrow(
        /Internal server error/,
      );
      expect(logged.join('\n')).toMatch(/another cache than herdcachePlugin/);
      const own = single(
        await server.executeOperation({ query: '{ a }' }, { contextValue: herdcacheContext({ cache }) }),
      );
      expect(own.data).toEqual({ a: 1 });
    } finally {
      await server.stop();
    }
  });
});

describe('herdcachePlugin: extensions default', () => {
  const saved = process.env.NODE_ENV;
  afterEach(() => {
    if (saved === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = saved;
  });

  async function extensionOf(extensions: boolean | undefined): Promise<unknown> {
    const { server } = fixture({ extensions });
    await server.start();
    try {
      return single(await server.executeOperation({ query: '{ hot { value } }' }, { contextValue: {} })).extensions
        ?.cache;
    } finally {
      await server.stop();
    }
  }

  it('is off when NODE_ENV=production, unless configured on', async () => {
    process.env.NODE_ENV = 'production';
    expect(await extensionOf(undefined)).toBeUndefined();
    expect(await extensionOf(true)).toBeDefined();
  });

  it('is on outside production, unless configured off', async () => {
    process.env.NODE_ENV = 'test';
    expect(await extensionOf(undefined)).toBeDefined();
    expect(await extensionOf(false)).toBeUndefined();
    delete process.env.NODE_ENV;
    expect(await extensionOf(undefined)).toBeDefined();
  });

  it('keeps other extensions', async () => {
    const cache = createCache({ ttl: Infinity });
    const withOther = new ApolloServer({
      typeDefs: 'type Query { a: Int }',
      resolvers: { Query: { a: () => 1 } },
      plugins: [
        herdcachePlugin({ cache, extensions: true }),
        {
          async requestDidStart() {
            return {
              async willSendResponse({ response }) {
                if (response.body.kind === 'single')
                  response.body.singleResult.extensions = { ...response.body.singleResult.extensions, other: 1 };
              },
            };
          },
        },
      ],
    });
    await withOther.start();
    try {
      const result = single(await withOther.executeOperation({ query: '{ a }' }, { contextValue: {} }));
      expect(result.extensions).toEqual({ other: 1, cache: { total: zeros(), sources: {} } });
    } finally {
      await withOther.stop();
    }
  });

  it('validates its options', () => {
    const cache = createCache({ ttl: Infinity });
    expect(() => herdcachePlugin({ cache: undefined as never })).toThrow(/option "cache"/);
    expect(() => herdcachePlugin({ cache, extensions: 'yes' as never })).toThrow(/option "extensions"/);
    expect(() => herdcachePlugin({ cache, maxOperationLabels: 0 })).toThrow(/option "maxOperationLabels"/);
    expect(() => herdcachePlugin({ cache, registry: {} as never })).toThrow(/option "registry"/);
  });
});

/**
 * A re-execution after an invalidation runs apart on a copy of a waiting request's context. When
 * that context came from herdcacheContext, its `scope` and `loaders` were the waiting request's:
 * what the re-execution loaded through them was noted for that request, not for the re-execution,
 * so the response it stored carried none of their tags, and a later invalidateTags of one of them
 * left it served (a hit with the older value until its maxAge ended). The copy now gets a scope and
 * loaders of its own, made as herdcacheContext made them.
 */
import { ApolloServer, HeaderMap } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo';
import { createCache } from '../../src/core';
import { type HerdcacheContext, herdcacheContext } from '../../src/graphql';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { profile: Profile @cacheControl(maxAge: 60) }
  type Profile @cacheControl(maxAge: 60) { version: Int! }
`;
type Result = {
  data: { profile: { version: number } };
  extensions: { cache: { response: string; notStoredReason?: string } };
};

/**
 * A profile read through a tagged loader or a tagged getOrCompute, and a resolver whose first
 * execution waits at `gate` after its read (it ends after the invalidation).
 */
function profileFixture(through: 'scope.getOrCompute' | 'loaders') {
  const cache = createCache({ ttl: 60_000 });
  const state = { version: 1, executions: 0 };
  const read = async () => ({ version: state.version });
  const profiles = cache.loader({
    name: 'profile',
    batch: async (ids: readonly string[]) => Promise.all(ids.map(read)),
    tags: () => ['Profile:1'],
  });
  type Context = HerdcacheContext<{ profile: typeof profiles }>;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const profile = async (_p: unknown, _a: unknown, ctx: Context) => {
    const execution = ++state.executions;
    const value =
      through === 'loaders'
        ? await ctx.loaders.profile.load('1')
        : await ctx.scope.getOrCompute('profile:1', read, { tags: ['Profile:1'] });
    if (execution === 1) await gate; // the first execution ends after the invalidation
    return value;
  };
  const context = () => herdcacheContext({ cache, loaders: { profile: profiles } });
  return { cache, state, open, profile, context };
}

it.each(['scope.getOrCompute', 'loaders'] as const)(
  'a re-execution apart tags its response with what it loaded through the copied context’s %s',
  async (through) => {
    const { cache, state, open, profile, context } = profileFixture(through);
    const schema = makeSchema(typeDefs, { Query: { profile } });
    const server = new ApolloServer({
      schema,
      plugins: [herdcachePlugin({ cache, extensions: true, responseCache: true })],
    });
    await server.start();
    const ask = async () => {
      const response = await server.executeOperation({ query: '{ profile { version } }' }, { contextValue: context() });
      return (response.body as unknown as { singleResult: Result }).singleResult;
    };
    try {
      const first = ask();
      await until(() => state.executions === 1, 'the first execution');
      const waiter = ask(); // joins the first execution
      await until(() => cache.metrics().total.coalesced >= 1, 'the waiter joining');
      state.version = 2;
      await cache.invalidateTags(['Profile:1']);
      open();
      const [leader, joined] = await Promise.all([first, waiter]);
      expect(leader.data.profile.version).toBe(1);
      expect(joined.data.profile.version).toBe(2); // re-executed apart for it
      expect(state.executions).toBe(2);
      await until(() => cache.inFlight === 0, 'the re-execution');
      expect((await ask()).extensions.cache.response).toBe('hit');
      // The stored response carries Profile:1: invalidating it makes the next read a miss.
      state.version = 3;
      await cache.invalidateTags(['Profile:1']);
      const after = await ask();
      expect(after.data.profile.version).toBe(3);
      expect(after.extensions.cache.response).toBe('miss');
    } finally {
      open();
      await server.stop();
      await cache.close();
    }
  },
);

it('the same when the waiting request is the 2nd operation of an Apollo batch (its context a copy already)', async () => {
  const { cache, state, open, profile, context } = profileFixture('loaders');
  const schema = makeSchema(`${typeDefs} extend type Query { ping: Int }`, { Query: { ping: () => 1, profile } });
  const server = new ApolloServer({
    schema,
    allowBatchedHttpRequests: true,
    plugins: [herdcachePlugin({ cache, extensions: true, responseCache: true })],
  });
  await server.start();
  const post = async (body: unknown) => {
    const response = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest: {
        method: 'POST',
        headers: new HeaderMap([['content-type', 'application/json']]),
        search: '',
        body,
      },
      context: async () => context(),
    });
    if (response.body.kind !== 'complete') throw new Error('expected a complete body');
    return JSON.parse(response.body.string) as Result | Result[];
  };
  const Q = { query: '{ profile { version } }' };
  try {
    const first = post(Q);
    await until(() => state.executions === 1, 'the first execution');
    const batch = post([{ query: '{ ping }' }, Q]); // its Q waits on the first execution
    await until(() => cache.metrics().total.coalesced >= 1, 'the batched operation joining');
    state.version = 2;
    await cache.invalidateTags(['Profile:1']);
    open();
    const [, answers] = await Promise.all([first, batch]);
    expect((answers as Result[])[1]!.data.profile.version).toBe(2); // re-executed apart on its context
    await until(() => cache.inFlight === 0, 'the re-execution');
    state.version = 3;
    await cache.invalidateTags(['Profile:1']);
    const after = (await post(Q)) as Result;
    expect(after.data.profile.version).toBe(3);
  } finally {
    open();
    await server.stop();
    await cache.close();
  }
});

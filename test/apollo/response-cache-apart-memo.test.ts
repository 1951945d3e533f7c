/**
 * The re-execution after an invalidation runs apart with a context: not a copy of the context of
 * the request that executed before the invalidation, whose per-request memo (a DataLoader made per
 * request, as applications do) holds what it read before it. That copy re-read the old value and
 * stored it as the response after the invalidation.
 */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo';
import { createCache } from '../../src/core';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { user(id: ID!): User @cacheControl(maxAge: 60) }
  type User @cacheControl(maxAge: 60) { id: ID!, name: String! }
`;
type Context = { nameOf(id: string): string };
type Result = {
  data: { user: { name: string } };
  extensions: { cache: { response: string; notStoredReason?: string } };
};

it.each([0, 3])(
  "apollo: %i waiters: a re-execution does not read the first execution's per-request memo",
  async (waiting) => {
    const cache = createCache();
    const names = new Map([['1', 'old']]);
    let executions = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const schema = makeSchema(typeDefs, {
      Query: {
        user: async (_p: unknown, { id }: { id: string }, ctx: Context) => {
          executions++;
          const user = { id, name: ctx.nameOf(id) };
          await gate;
          return user;
        },
      },
    });
    const server = new ApolloServer<Context>({
      schema,
      plugins: [herdcachePlugin<Context>({ cache, extensions: true, responseCache: true })],
    });
    await server.start();
    // A per-request memo, made with each request's context.
    const context = (): Context => {
      const memo = new Map<string, string>();
      return { nameOf: (id) => memo.get(id) ?? (memo.set(id, names.get(id)!), memo.get(id)!) };
    };
    const ask = async () => {
      const response = await server.executeOperation(
        { query: '{ user(id: "1") { id name } }' },
        { contextValue: context() },
      );
      return (response.body as unknown as { singleResult: Result }).singleResult;
    };
    try {
      const first = ask();
      await until(() => executions === 1, 'the first execution');
      const waiters = Array.from({ length: waiting }, () => ask());
      await new Promise((resolve) => setTimeout(resolve, 50));
      names.set('1', 'new');
      await cache.invalidateTags(['User:1']);
      open();
      const [leader, ...rest] = await Promise.all([first, ...waiters]);
      expect(leader!.data.user.name).toBe('old');
      for (const result of rest) expect(result.data.user.name).toBe('new');
      await until(() => cache.inFlight === 0, 'the re-execution');
      const after = await ask();
      expect(after.data.user.name).toBe('new');
    } finally {
      open();
      await server.stop();
      await cache.close();
    }
  },
);

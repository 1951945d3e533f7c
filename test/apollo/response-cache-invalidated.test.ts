/**
 * An invalidation while a shared execution runs, of an entity its result turns out to hold: the
 * result predates it and is neither stored nor handed to the requests waiting on it. Those get ONE
 * re-execution between them (run apart from any request), not one execution each: 20 requests, 2
 * executions. The request that executed first gets its own result (it started before the
 * invalidation), told `notStoredReason: 'invalidated'`; the re-execution is stored. Invalidations
 * of other entities leave the execution be (its tags are checked when it ends). Apollo 5 and Yoga
 * 5, memory and Redis (there the re-execution's fill waits for the fill lock the invalidated
 * execution holds).
 */
import { ApolloServer } from '@apollo/server';
import { createYoga } from 'graphql-yoga';
import type Redis from 'ioredis';
import { herdcachePlugin } from '../../src/apollo';
import { createCache } from '../../src/core';
import { useHerdcache } from '../../src/envelop';
import { redisStore } from '../../src/redis';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';
import { connect, randomPrefix } from '../redis/helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { user(id: ID!): User @cacheControl(maxAge: 60) }
  type User @cacheControl(maxAge: 60) { id: ID!, name: String! }
`;
type Result = {
  data: { user: { id: string; name: string } };
  extensions: { cache: { response: string; notStoredReason?: string } };
};
const QUERY = '{ user(id: "1") { id name } }';

it.each([
  ['apollo', 'memory'],
  ['yoga', 'memory'],
  ['apollo', 'redis'],
  ['yoga', 'redis'],
])(
  '%s, %s store: 20 requests share an execution invalidated while it runs: one re-execution answers the 19 waiters',
  async (kind, store) => {
    const cache = createCache(
      store === 'redis' ? { store: redisStore({ client, prefix: randomPrefix('invalidated') }) } : {},
    );
    const names = new Map([['1', 'old']]);
    let executions = 0;
    // The first execution waits for `open`, the re-execution for `openAgain`.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let openAgain!: () => void;
    const gateAgain = new Promise<void>((resolve) => (openAgain = resolve));
    const schema = makeSchema(typeDefs, {
      Query: {
        user: async (_p: unknown, { id }: { id: string }) => {
          const execution = ++executions;
          const user = { id, name: names.get(id) }; // read, then the rest of the execution
          await (execution === 1 ? gate : gateAgain);
          return user;
        },
      },
    });
    const { ask, stop } = await serve(kind, cache, schema);
    try {
      const first = ask();
      await until(() => executions === 1, 'the first execution');
      const waiters = Array.from({ length: 19 }, () => ask());
      // Let every waiter reach the cache (a late one joins the re-execution: the same count).
      await new Promise((resolve) => setTimeout(resolve, 50));
      names.set('1', 'new');
      await cache.invalidateTags(['User:1']); // the entity tag of the response being computed
      // The re-execution starts when the first ends with the tag (known then): with Redis, its fill
      // also waits for the fill lock, which the invalidated execution holds until it ends.
      open();
      // The first request is answered without waiting for the re-execution (still held here).
      const leader = await first;
      openAgain();
      const rest = await Promise.all(waiters);
      expect(executions).toBe(2);
      expect(leader.data.user.name).toBe('old');
      expect(leader.extensions.cache).toMatchObject({ response: 'miss', notStoredReason: 'invalidated' });
      for (const result of rest) {
        expect(result.data.user.name).toBe('new');
        expect(result.extensions.cache.response).toBe('coalesced');
      }
      // The re-execution was stored: a hit, fresh.
      const after = await ask();
      expect(after.data.user.name).toBe('new');
      expect(after.extensions.cache.response).toBe('hit');
      expect(executions).toBe(2);
    } finally {
      open();
      openAgain();
      await stop();
      await cache.close();
    }
  },
);

/** An Apollo or Yoga server over `cache` answering QUERY; `stop` ends it. */
async function serve(
  kind: string,
  cache: ReturnType<typeof createCache>,
  schema: ReturnType<typeof makeSchema>,
): Promise<{ ask: () => Promise<Result>; stop: () => Promise<void> }> {
  if (kind === 'apollo') {
    const server = new ApolloServer({
      schema,
      plugins: [herdcachePlugin({ cache, extensions: true, responseCache: true })],
    });
    await server.start();
    const ask = async () =>
      ((await server.executeOperation({ query: QUERY })).body as unknown as { singleResult: Result }).singleResult;
    return { ask, stop: () => server.stop() };
  }
  const yoga = createYoga({
    schema,
    plugins: [useHerdcache({ cache, extensions: true, responseCache: true })],
    logging: false,
  });
  const ask = async () =>
    (await (
      await yoga.fetch('http://yoga/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: QUERY }),
      })
    ).json()) as Result;
  return { ask, stop: async () => {} };
}

it.each([['apollo'], ['yoga']])(
  '%s: invalidated twice while it runs (a tag it holds): one re-execution per invalidation, each run with another waiter, never one execution each',
  async (kind) => {
    const cache = createCache();
    let executions = 0;
    const gates: (() => void)[] = [];
    const opened = (n: number) => new Promise<void>((resolve) => (gates[n] = resolve));
    const held = [opened(1), opened(2), opened(3)];
    const schema = makeSchema(typeDefs, {
      Query: {
        user: async (_p: unknown, { id }: { id: string }) => {
          const execution = ++executions;
          await (held[execution - 1] ?? Promise.resolve());
          return { id, name: `v${execution}` };
        },
      },
    });
    const { ask, stop } = await serve(kind, cache, schema);
    try {
      const first = ask();
      await until(() => executions === 1, 'the first execution');
      const waiters = Array.from({ length: 19 }, () => ask());
      await new Promise((resolve) => setTimeout(resolve, 50));
      await cache.invalidateTags(['User:1']);
      gates[1]!();
      await until(() => executions === 2, 'the re-execution');
      await cache.invalidateTags(['User:1']);
      gates[2]!();
      await until(() => executions === 3, 'the second re-execution');
      gates[3]!();
      const [leader, ...rest] = await Promise.all([first, ...waiters]);
      expect(executions).toBe(3);
      expect(leader!.data.user.name).toBe('v1');
      expect(leader!.extensions.cache).toMatchObject({ response: 'miss', notStoredReason: 'invalidated' });
      expect(new Set(rest.map((r) => `${r.data.user.name}/${r.extensions.cache.response}`))).toEqual(
        new Set(['v3/coalesced']),
      );
      const after = await ask();
      expect(after.extensions.cache.response).toBe('hit');
      expect(executions).toBe(3);
    } finally {
      for (const open of gates) open?.();
      await stop();
      await cache.close();
    }
  },
);

it.each([
  ['apollo', 'memory'],
  ['yoga', 'memory'],
  ['apollo', 'redis'],
  ['yoga', 'redis'],
])(
  '%s, %s store: a stream of writes to other entities while it runs: one execution answers all 20 requests, and is stored',
  async (kind, store) => {
    const cache = createCache(
      store === 'redis' ? { store: redisStore({ client, prefix: randomPrefix('unrelated') }) } : {},
    );
    let executions = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const schema = makeSchema(typeDefs, {
      Query: {
        user: async (_p: unknown, { id }: { id: string }) => {
          executions++;
          await gate;
          return { id, name: 'one' };
        },
      },
    });
    const { ask, stop } = await serve(kind, cache, schema);
    try {
      const first = ask();
      await until(() => executions === 1, 'the first execution');
      const waiters = Array.from({ length: 19 }, () => ask());
      await new Promise((resolve) => setTimeout(resolve, 50));
      // Mutations of other entities (before: each abandoned every response in flight, and its
      // waiters ended up executing one each).
      for (let i = 0; i < 10; i++) await cache.invalidateTags([`Other:${i}`, `User:${i + 2}`]);
      open();
      const [leader, ...rest] = await Promise.all([first, ...waiters]);
      expect(executions).toBe(1);
      expect(leader!.extensions.cache.response).toBe('miss');
      expect(leader!.extensions.cache.notStoredReason).toBeUndefined();
      for (const result of rest) expect(result.extensions.cache.response).toBe('coalesced');
      expect((await ask()).extensions.cache.response).toBe('hit');
      expect(executions).toBe(1);
    } finally {
      open();
      await stop();
      await cache.close();
    }
  },
);

/**
 * A request that joins a replica's execution after a mutation returned on another replica is not
 * given the execution's older result: the tag clock tells the execution's store step that one of
 * its entities was invalidated elsewhere while it ran, and the requests that waited on it (they
 * may have come after that mutation) execute again, sharing one execution; the request that
 * executed keeps its own result (it started before the mutation). Two caches on one Redis stand
 * for two replicas.
 */
import { ApolloServer } from '@apollo/server';
import type { GraphQLSchema } from 'graphql';
import type Redis from 'ioredis';
import { herdcachePlugin } from '../../src/apollo';
import { type Cache, createCache } from '../../src/core';
import { redisStore } from '../../src/redis';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';
import { connect, randomPrefix } from './helpers';

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

/** Replica A's Apollo server over `cache`, and a request for user 1 to it. */
async function replicaA(schema: GraphQLSchema, cache: Cache, responseCache: true | { maxBytes: number }) {
  const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache, extensions: true, responseCache })] });
  await server.start();
  const ask = async () =>
    (
      (await server.executeOperation({ query: '{ user(id: "1") { id name } }' })).body as unknown as {
        singleResult: Result;
      }
    ).singleResult;
  return { server, ask };
}

/** The schema over user names (user 1 'old'), counting its executions. */
function countingSchema() {
  const names = new Map([['1', 'old']]);
  let count = 0;
  const schema = makeSchema(typeDefs, {
    Query: {
      user: (_p: unknown, { id }: { id: string }) => {
        count++;
        return { id, name: names.get(id)! };
      },
    },
  });
  return { names, schema, executions: () => count };
}

/** Replica A executes; B's mutation returns; a request sent to A then joins A's execution: it must get the new value. */
async function joinAfterRemoteMutation(responseCache: true | { maxBytes: number }): Promise<void> {
  const prefix = randomPrefix('remote-join');
  const caches = [
    createCache({ store: redisStore({ client, prefix }) }),
    createCache({ store: redisStore({ client, prefix }) }),
  ];
  const names = new Map([['1', 'old']]);
  let executions = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const schema = makeSchema(typeDefs, {
    Query: {
      user: async (_p: unknown, { id }: { id: string }) => {
        const execution = ++executions;
        const read = { id, name: names.get(id)! }; // read first, then the rest of the execution
        if (execution === 1) await gate;
        return read;
      },
    },
  });
  const { server, ask } = await replicaA(schema, caches[0]!, responseCache);
  try {
    const first = ask();
    await until(() => executions === 1, 'the first execution');
    // The mutation, on the other replica: its write, then its invalidation, returned.
    names.set('1', 'new');
    await caches[1]!.invalidateTags(['User:1']);
    const joiner = ask(); // sent after the mutation returned
    await until(() => caches[0]!.metrics().total.coalesced === 1, 'the joiner joining the execution');
    open();
    const [leader, late] = await Promise.all([first, joiner]);
    expect(leader.data.user.name).toBe('old');
    expect(leader.extensions.cache.notStoredReason).toBe('invalidated');
    expect(late.data.user.name).toBe('new');
    expect(executions).toBe(2);
  } finally {
    open();
    await server.stop();
    for (const cache of caches) await cache.close();
  }
}

it('a request joining after another replica invalidated an entity of the running execution gets a fresh answer', () =>
  joinAfterRemoteMutation(true));

it('the same for a response too large to store (served to its waiters only): the joiner after the mutation gets a fresh answer', () =>
  joinAfterRemoteMutation({ maxBytes: 10 }));

/**
 * The window the check above does not cover: the execution ended and its tags' versions are being
 * read when the other replica's mutation returns, and the read (sent before it) sees nothing. A
 * request sent after the mutation must not join the execution then: it reads the store (the
 * result written with the versions read before the mutation is a miss) and executes again.
 */
async function joinDuringVersionRead(responseCache: true | { maxBytes: number }): Promise<void> {
  const prefix = randomPrefix('remote-join-read');
  const store = redisStore({ client, prefix });
  let onRead: (() => Promise<void>) | undefined;
  const readVersions = store.tagVersionsSince!.bind(store);
  store.tagVersionsSince = async (tags, since) => {
    const versions = await readVersions(tags, since);
    const hook = onRead;
    onRead = undefined;
    if (hook !== undefined) await hook(); // the reply is in, not yet handed back: the window
    return versions;
  };
  const caches = [createCache({ store }), createCache({ store: redisStore({ client, prefix }) })];
  const { names, schema, executions } = countingSchema();
  const { server, ask } = await replicaA(schema, caches[0]!, responseCache);
  try {
    let late: Promise<Result> | undefined;
    onRead = async () => {
      // The mutation, on the other replica, returns; then a request is sent to this one.
      names.set('1', 'new');
      await caches[1]!.invalidateTags(['User:1']);
      late = ask();
      await new Promise((resolve) => setTimeout(resolve, 20)); // it joins now, or starts its own load
    };
    const leader = await ask();
    expect(leader.data.user.name).toBe('old');
    expect(late).toBeDefined();
    const answer = await late!;
    expect(answer.data.user.name).toBe('new');
    expect(answer.extensions.cache.response).not.toBe('coalesced');
    expect(executions()).toBe(2);
    // And what the store holds is not the older response either.
    const again = await ask();
    expect(again.data.user.name).toBe('new');
  } finally {
    onRead = undefined;
    await server.stop();
    for (const cache of caches) await cache.close();
  }
}

it('a request sent after another replica invalidated an entity while the execution reads its tags’ versions does not join it', () =>
  joinDuringVersionRead(true));

it('the same for a response too large to store, shared with its waiters only', () =>
  joinDuringVersionRead({ maxBytes: 10 }));

/**
 * A request sent after another replica's mutation returned, while an identical request's read of
 * the stored response is under way (its versions read sent before the mutation; the reply held here): it does not
 * take what that read found. It reads again once the read is answered (core/read-window) and
 * executes; the request whose read it was is answered with the stored response (it came first).
 */
it('a request sent after another replica invalidated, during an identical request’s read of the stored response, does not take that read’s answer', async () => {
  const prefix = randomPrefix('remote-join-lookup');
  const store = redisStore({ client, prefix });
  let hold: (() => Promise<void>) | undefined;
  const held =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const reply = await call(...args);
      const next = hold;
      hold = undefined;
      if (next !== undefined) await next(); // the reply is in, not yet handed back
      return reply;
    };
  // The read's last step: the current versions of the stored response's tags (read after the entry).
  store.tagVersions = held(store.tagVersions!.bind(store));
  const caches = [createCache({ store }), createCache({ store: redisStore({ client, prefix }) })];
  const { names, schema, executions } = countingSchema();
  const { server, ask } = await replicaA(schema, caches[0]!, true);
  try {
    expect((await ask()).extensions.cache.response).toBe('miss'); // stored
    let late: Promise<Result> | undefined;
    hold = async () => {
      names.set('1', 'new');
      await caches[1]!.invalidateTags(['User:1']);
      late = ask();
      await new Promise((resolve) => setTimeout(resolve, 20)); // it reaches the cache now
    };
    const first = await ask();
    expect(first.data.user.name).toBe('old'); // its read was sent before the mutation
    expect(first.extensions.cache.response).toBe('hit');
    expect(late).toBeDefined();
    const answer = await late!;
    expect(answer.data.user.name).toBe('new');
    expect(answer.extensions.cache.response).toBe('miss');
    expect(executions()).toBe(2);
  } finally {
    hold = undefined;
    await server.stop();
    for (const cache of caches) await cache.close();
  }
});

/**
 * Two replicas of the response layer on one Redis (redisStore: neither hears the other's
 * invalidations), found by test/stress/response-settle: a gap, now closed by the tag clock
 * (src/redis/tag-clock.ts).
 *
 * Replica A executes a query and reads an entity; while it runs, a mutation on replica B changes
 * the entity and invalidates its tag (the version in Redis moves) and returns. A's execution then
 * ends. Its tags are known only now, so their versions are read now, the new ones: before the tag
 * clock, its response (older than the mutation) was stored as current and served by both replicas
 * until it expired. Now A read the clock before executing, sees that the tag was invalidated after
 * that, and serves its response without storing it. (In one process the same interleaving was
 * always safe: any tag invalidation abandons a response being computed.)
 */
import { ApolloServer } from '@apollo/server';
import type Redis from 'ioredis';
import { herdcachePlugin } from '../../src/apollo';
import { createCache } from '../../src/core';
import { cachedDirectiveTransformer } from '../../src/graphql';
import { redisStore } from '../../src/redis';
import { makeSchema } from '../graphql/fixtures';
import { connect, randomPrefix } from '../redis/helpers';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { user(id: ID!): User @cacheControl(maxAge: 60) }
  type Mutation { renameUser(id: ID!, name: String!): User @invalidates(tags: ["User:{args.id}"]) }
  type User { id: ID!, name: String! }
`;

const clients: Redis[] = [];
afterAll(() => {
  for (const client of clients) client.disconnect();
});

it('two replicas on one Redis: a mutation on B while A executes the query: no read after it returns the old name', async () => {
  const names = new Map([['1', 'old']]);
  let gate: Promise<void> | undefined;
  let open!: () => void;
  let reads = 0;
  const prefix = randomPrefix('replicas-gap');
  const replica = async () => {
    const [client, subscriber] = [await connect(), await connect()];
    clients.push(client, subscriber);
    const cache = createCache({ store: redisStore({ client, subscriber, prefix }) });
    const schema = makeSchema(typeDefs, {
      Query: {
        user: async (_p, { id }: { id: string }) => {
          reads++;
          const user = { id, name: names.get(id) }; // read, then the rest of the execution
          if (gate !== undefined) await gate;
          return user;
        },
      },
      Mutation: {
        renameUser: (_p, { id, name }: { id: string; name: string }) => (names.set(id, name), { id, name }),
      },
    });
    cachedDirectiveTransformer(schema, { cache });
    const server = new ApolloServer({
      schema,
      plugins: [herdcachePlugin({ cache, extensions: true, responseCache: true })],
    });
    await server.start();
    return { cache, server };
  };
  const a = await replica();
  const b = await replica();
  const single = async (server: ApolloServer, source: string) => {
    const response = await server.executeOperation({ query: source }, { contextValue: {} });
    return response.body.kind === 'single' ? response.body.singleResult : undefined;
  };
  const query = async (server: ApolloServer, source: string) => (await single(server, source))?.data as any;
  try {
    gate = new Promise((resolve) => (open = resolve));
    const during = single(a.server, '{ user(id: "1") { id name } }');
    while (reads === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    gate = undefined;
    const written = await query(b.server, 'mutation { renameUser(id: "1", name: "new") { id name } }');
    expect(written.renameUser.name).toBe('new');
    open();
    // Concurrent with the mutation: may be either; not stored, and told so.
    expect((await during)?.extensions?.cache).toMatchObject({ response: 'miss', notStoredReason: 'invalidated' });
    // Asked after the mutation returned: on either replica, the new name.
    expect((await query(a.server, '{ user(id: "1") { id name } }')).user.name).toBe('new');
    expect((await query(b.server, '{ user(id: "1") { id name } }')).user.name).toBe('new');
  } finally {
    await a.server.stop();
    await b.server.stop();
    await a.cache.close();
    await b.cache.close();
  }
});

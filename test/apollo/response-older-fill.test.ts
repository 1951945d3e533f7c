/**
 * A whole response is not stored when one of its @cached fields was answered by a fill in flight
 * since before its execution (a concurrent operation's): that value may predate an invalidation
 * on another replica after this execution's tag clock reading, which fences only what ran after
 * it. Found by a soak: replica B runs Q2, whose field fill starts (version 0); replica A's mutation
 * bumps the tag and returns; then Q1 (another document reading the same field) starts on B, joins
 * Q2's fill and gets version 0, which alone is the documented exception; but Q1's response was
 * then stored and served as a hit on every replica until maxAge (25.7 s after the mutation).
 * Two replicas (two caches, one Redis prefix); counted: what each read answers and its outcome.
 */
import { ApolloServer } from '@apollo/server';
import type Redis from 'ioredis';
import { buildSchema } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../src/graphql';
import { redisStore } from '../../src/redis/redis-store';
import { deferred } from '../helpers';
import { until } from '../graphql/response-fixture';
import { connect, randomPrefix } from '../redis/helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  client.disconnect();
});

const sdl = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  ${cachedDirectiveTypeDefs}
  type Product @cacheControl(maxAge: 30) { id: ID!, version: Int! }
  type Query { product(id: ID!): Product @cached(ttl: 30, tags: ["Product:{args.id}"]) @cacheControl(maxAge: 30) }
`;

it("a response whose field joined another operation's fill started before it is served, not stored", async () => {
  const prefix = randomPrefix('older-fill');
  let version = 0;
  let reads = 0;
  let gate: ReturnType<typeof deferred<void>> | undefined;
  const replicas = await Promise.all(
    ['A', 'B'].map(async () => {
      const cache = createCache({ store: redisStore({ client, prefix }), ttl: 30_000 });
      const schema = buildSchema(sdl);
      schema.getQueryType()!.getFields().product!.resolve = async (_p, { id }: { id: string }) => {
        const read = version; // the database read, before the wait
        reads++;
        if (gate !== undefined) await gate.promise;
        return { id, version: read };
      };
      cachedDirectiveTransformer(schema, { cache });
      const server = new ApolloServer({
        schema,
        plugins: [herdcachePlugin({ cache, responseCache: true, extensions: true })],
      });
      await server.start();
      const ask = async (query: string) => {
        const response = await server.executeOperation({ query }, { contextValue: herdcacheContext({ cache }) });
        const body = (
          response.body as unknown as {
            singleResult: {
              data: Record<string, { version: number }>;
              extensions: { cache: { response: string; notStoredReason?: string } };
            };
          }
        ).singleResult;
        return { version: Object.values(body.data)[0]!.version, ...body.extensions.cache };
      };
      return { cache, server, ask };
    }),
  );
  const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
  const Q1 = '{ product(id: "z") { id version } }';
  const Q2 = 'query Other { p: product(id: "z") { id version } }';
  try {
    gate = deferred<void>();
    const q2 = b.ask(Q2); // its field fill starts and reads version 0
    await until(() => reads === 1, "Q2's field fill read");
    version = 1;
    await a.cache.invalidateTags(['Product:z']); // the mutation on A returns
    const coalesced = b.cache.metrics().total.coalesced;
    const q1 = b.ask(Q1); // starts after it, joins Q2's field fill
    await until(() => b.cache.metrics().total.coalesced > coalesced, "Q1's field joining Q2's fill");
    gate.resolve();
    gate = undefined;
    expect((await q2).version).toBe(0);
    const first = await q1;
    expect(first.version).toBe(0); // the documented exception: it joined a fill running in its process
    expect(first.notStoredReason).toBe('older_fill');
    // ...but that answer is not kept: the next read executes again, and every later read, on
    // either replica, is fresh.
    const next = await b.ask(Q1);
    expect([next.version, next.response]).toEqual([1, 'miss']);
    for (const replica of [b, a]) expect((await replica.ask(Q1)).version).toBe(1);
  } finally {
    for (const replica of replicas) {
      await replica.server.stop();
      await replica.cache.close();
    }
  }
});

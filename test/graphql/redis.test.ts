/** @cached over the real Redis store: one read for a list's siblings, one resolver call across replicas, @invalidates across replicas. */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, cacheReport, herdcacheContext } from '../../src/graphql';
import { redisStore } from '../../src/redis/redis-store';
import { countingStore, deferred } from '../helpers';
import { connect, randomPrefix } from '../redis/helpers';
import { callCounter, makeSchema, run } from './fixtures';

const typeDefs = `
  type Query { users(ids: [ID!]!): [User!]!, report: String @cached(ttl: 60) }
  type User { id: ID!, score: Int! @cached(ttl: 60) }
`;

describe('@cached on the Redis store', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connect();
  });
  afterAll(async () => {
    await client.quit();
  });

  function replica(prefix: string, resolvers: Parameters<typeof makeSchema>[1]) {
    const counting = countingStore(redisStore({ client, prefix }));
    const cache = createCache({ store: counting.store, lockPollInterval: 5, lockWaitTimeout: 10_000 });
    const schema = makeSchema(typeDefs, resolvers);
    cachedDirectiveTransformer(schema, { cache });
    return { cache, schema, calls: counting.calls };
  }

  it('a list of N siblings: one store read (one MGET) for the N keys, then hits from Redis', async () => {
    const counter = callCounter();
    const prefix = randomPrefix('gql-siblings');
    const resolvers = {
      Query: { users: (_p: unknown, { ids }: { ids: string[] }) => ids.map((id) => ({ id })) },
      User: {
        score: (user: { id: string }) => {
          counter.count(user.id);
          return Number(user.id);
        },
      },
    };
    const a = replica(prefix, resolvers);
    const ids = Array.from({ length: 20 }, (_, i) => String(i));
    const first = await run(a.schema, `{ users(ids: ${JSON.stringify(ids)}) { score } }`);
    expect((first.data as any).users.map((u: { score: number }) => u.score)).toEqual(ids.map(Number));
    expect(a.calls.getMany).toBe(1);
    expect(a.calls.getManyKeys[0]).toHaveLength(20);
    // Another replica (its own registry, same Redis): everything is a hit, in one read.
    const b = replica(prefix, resolvers);
    const ctx = herdcacheContext({ cache: b.cache });
    await run(b.schema, `{ users(ids: ${JSON.stringify(ids)}) { score } }`, ctx);
    expect(b.calls.getMany).toBe(1);
    expect(cacheReport(ctx)!.sources['User.score']).toMatchObject({ hits: 20, misses: 0 });
    expect(Object.values(counter.calls)).toEqual(Array(20).fill(1));
  });

  it('concurrent operations on a field warm in Redis: each operation report says hit, none coalesced', async () => {
    const prefix = randomPrefix('gql-warm-burst');
    let calls = 0;
    const resolvers = { Query: { report: () => `r${++calls}` } };
    await run(replica(prefix, resolvers).schema, '{ report }');
    // A fresh replica: nothing in process, so the 10 operations share one store read.
    const b = replica(prefix, resolvers);
    const contexts = Array.from({ length: 10 }, () => herdcacheContext({ cache: b.cache }));
    const results = await Promise.all(contexts.map((ctx) => run(b.schema, '{ report }', ctx)));
    expect(results.map((r) => r.data)).toEqual(Array(10).fill({ report: 'r1' }));
    expect(b.calls.getMany).toBe(1);
    for (const ctx of contexts) expect(cacheReport(ctx)!.total).toMatchObject({ hits: 1, coalesced: 0, misses: 0 });
  });

  it('two replicas stampeding one field: the resolver runs once fleet-wide (fill lock)', async () => {
    const prefix = randomPrefix('gql-lock');
    const gate = deferred<void>();
    let calls = 0;
    const resolvers = {
      Query: {
        report: async () => {
          calls++;
          await gate.promise;
          return 'expensive';
        },
      },
    };
    const replicas = [replica(prefix, resolvers), replica(prefix, resolvers)];
    const contexts = replicas.flatMap((r) =>
      Array.from({ length: 10 }, () => ({ r, ctx: herdcacheContext({ cache: r.cache }) })),
    );
    const pending = contexts.map(({ r, ctx }) => run(r.schema, '{ report }', ctx));
    // Let both replicas try the lock before the winner's fill may finish.
    await new Promise((resolve) => setTimeout(resolve, 50));
    gate.resolve();
    const results = await Promise.all(pending);
    expect(results.map((r) => r.data)).toEqual(Array(20).fill({ report: 'expensive' }));
    expect(calls).toBe(1);
    const totals = contexts.map(({ ctx }) => cacheReport(ctx)!.total);
    expect(totals.reduce((n, t) => n + t.fills, 0)).toBe(1);
    expect(totals.reduce((n, t) => n + t.lockContended, 0)).toBe(1);
  });

  it('@invalidates on one replica makes the tagged @cached values a miss on another (tags in Redis)', async () => {
    const prefix = randomPrefix('gql-invalidates');
    const names: Record<string, string> = { u1: 'Ann', u2: 'Bob' };
    const counter = callCounter();
    const defs = `
      type Query { user(id: ID!): Person @cached(ttl: 60, tags: ["User:{args.id}"]) }
      type Person { id: ID!, name: String! }
      type Mutation { rename(id: ID!, name: String!): Person @invalidates(tags: ["User:{result.id}"]) }
    `;
    const replicaOf = () => {
      const cache = createCache({ store: redisStore({ client, prefix }) });
      const schema = makeSchema(defs, {
        Query: {
          user: (_p, { id }) => {
            counter.count(id);
            return { id, name: names[id] };
          },
        },
        Mutation: {
          rename: (_p, { id, name }) => {
            names[id] = name;
            return { id, name };
          },
        },
      });
      cachedDirectiveTransformer(schema, { cache });
      return schema;
    };
    const a = replicaOf();
    const b = replicaOf();
    const query = '{ a: user(id: "u1") { name } b: user(id: "u2") { name } }';
    expect((await run(a, query)).data).toEqual({ a: { name: 'Ann' }, b: { name: 'Bob' } });
    expect((await run(b, query)).data).toEqual({ a: { name: 'Ann' }, b: { name: 'Bob' } });
    expect(counter.calls).toEqual({ u1: 1, u2: 1 });
    expect((await run(b, 'mutation { rename(id: "u1", name: "Anna") { id } }')).data).toEqual({ rename: { id: 'u1' } });
    expect((await run(a, query)).data).toEqual({ a: { name: 'Anna' }, b: { name: 'Bob' } });
    expect((await run(b, query)).data).toEqual({ a: { name: 'Anna' }, b: { name: 'Bob' } });
    expect(counter.calls).toEqual({ u1: 2, u2: 1 });
  });
});

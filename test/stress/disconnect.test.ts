/**
 * A hung request cannot be made from outside: clients that disconnect mid-request (seeded, at
 * random points), against real servers over HTTP (Yoga 5 with execution cancellation, so a
 * disconnect aborts the operation's execution; Apollo Server 5), on @cached fields (PUBLIC and
 * PRIVATE) and loader fields whose fills take varied time and sometimes fail. Each operation's
 * context carries the request's signal (herdcacheContext({ signal })), so a disconnect also ends
 * the operation's waits inside herdcache and abandons fills nobody else wants.
 *
 * Checked once the clients are done: every promise a resolver returned settled (each resolver is
 * wrapped, outermost, after the @cached transform), nothing is left in flight, every request that
 * was not aborted got an answer, and the server still answers a plain request.
 */
import { type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { type GraphQLSchema, isObjectType } from 'graphql';
import { createYoga, useExecutionCancellation } from 'graphql-yoga';
import { herdcachePlugin } from '../../src/apollo';
import { createCache } from '../../src/core';
import { useHerdcache } from '../../src/envelop';
import { cachedDirectiveTransformer, herdcacheContext } from '../../src/graphql';
import { makeSchema } from '../graphql/fixtures';
import { prng } from './settle';

const typeDefs = `
  type Query {
    pub(n: Int!): Int @cached(ttl: 60000)
    mine(n: Int!): String @cached(ttl: 60000, scope: PRIVATE)
    user(id: ID!): User
    users(ids: [ID!]!): [User]
  }
  type User { id: ID!, score: Int @cached(ttl: 60000) }
`;

function app(seed: number) {
  const random = prng(seed);
  const wait = () => new Promise<void>((resolve) => setTimeout(resolve, Math.floor(random() * 10)));
  const maybeFail = (what: string) => {
    if (random() < 0.15) throw new Error(`${what} failed`);
  };
  const cache = createCache();
  /** Batches told to stop: every request that wanted them left (the request signals reach the fills). */
  const abandoned = { fills: 0 };
  const users = cache.loader<string, { id: string }>({
    name: 'user',
    ttl: 60_000,
    batch: async (ids, { signal }) => {
      await wait();
      if (signal.aborted) abandoned.fills++;
      return ids.map((id) => (random() < 0.1 ? new Error(`no user ${id}`) : { id }));
    },
  });
  const schema = makeSchema(typeDefs, {
    Query: {
      pub: async (_p, { n }) => (await wait(), maybeFail('pub'), n),
      mine: async (_p, { n }, ctx) => (await wait(), maybeFail('mine'), `${ctx.session}:${n}`),
      user: (_p, { id }, ctx) => ctx.loaders.user.load(id),
      users: (_p, { ids }, ctx) => ctx.loaders.user.loadMany(ids),
    },
    User: { score: async (user) => (await wait(), maybeFail('score'), Number(user.id)) },
  });
  cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { session?: string }) => ctx.session });
  const pending = trackResolvers(schema);
  const context = (session: string | undefined, signal?: AbortSignal) => ({
    ...herdcacheContext({ cache, loaders: { user: users }, signal }),
    session,
  });
  return { cache, schema, pending, context, random, abandoned };
}

/** Wraps every field resolver, outermost: counts the promises they return that have not settled. */
function trackResolvers(schema: GraphQLSchema): { count: number; started: number } {
  const state = { count: 0, started: 0 };
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const inner = field.resolve;
      if (inner === undefined) continue;
      field.resolve = (...args) => {
        const result = inner(...args);
        if (result instanceof Promise) {
          state.count++;
          state.started++;
          result.then(
            () => state.count--,
            () => state.count--,
          );
        }
        return result;
      };
    }
  }
  return state;
}

function query(random: () => number): string {
  const n = () => Math.floor(random() * 4);
  // Few field keys (requests share fills), many user ids (a request is often a fill's only reader).
  const id = () => Math.floor(random() * 200);
  const parts = [
    `pub(n: ${n()})`,
    `mine(n: ${n()})`,
    `user(id: "${id()}") { id score }`,
    `users(ids: ["${id()}", "${id()}"]) { id score }`,
  ];
  return `{ ${parts.filter(() => random() < 0.7).join(' ') || 'pub(n: 0)'} }`;
}

/** Sends `count` requests in waves; a share of them aborted before or during the request. */
async function storm(url: string, random: () => number, count: number) {
  const outcome = { answered: 0, aborted: 0, unanswered: [] as string[] };
  for (let wave = 0; wave < count / 20; wave++) {
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        const controller = new AbortController();
        const plan = random();
        if (plan < 0.1) controller.abort();
        else if (plan < 0.5) setTimeout(() => controller.abort(), Math.floor(random() * 15));
        const body = JSON.stringify({ query: query(random) });
        const session = `s${Math.floor(random() * 3)}`;
        try {
          const response = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-session': session },
            body,
            signal: controller.signal,
          });
          const json = (await response.json()) as { data?: unknown };
          if (json.data === undefined)
            outcome.unanswered.push(`${response.status} ${JSON.stringify(json).slice(0, 200)}`);
          else outcome.answered++;
        } catch (error) {
          if (controller.signal.aborted) outcome.aborted++;
          else outcome.unanswered.push(String(error));
        }
      }),
    );
  }
  return outcome;
}

/** A signal that fires when the client goes away before its response was sent (Node's http). */
function clientLeft(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new Error('the client went away'));
  });
  return controller.signal;
}

async function settled(state: { count: number }, inFlight: () => number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((state.count > 0 || inFlight() > 0) && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('clients that disconnect mid-request never leave a request hanging', () => {
  it('Yoga 5 with execution cancellation: every resolver promise settles, nothing in flight, the server answers', async () => {
    const { cache, schema, pending, context, random, abandoned } = app(7);
    const yoga = createYoga({
      schema,
      plugins: [useExecutionCancellation(), useHerdcache({ cache })],
      context: ({ request }) => context(request.headers.get('x-session') ?? undefined, request.signal),
      logging: false,
    });
    const server: Server = createServer((req, res) => void yoga(req, res));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
    try {
      const outcome = await storm(url, random, 400);
      await settled(pending, () => cache.inFlight);
      expect({ pending: pending.count, inFlight: cache.inFlight, unanswered: outcome.unanswered }).toEqual({
        pending: 0,
        inFlight: 0,
        unanswered: [],
      });
      expect(outcome.aborted).toBeGreaterThan(40);
      expect(outcome.answered).toBeGreaterThan(100);
      expect(abandoned.fills).toBeGreaterThan(0);
      expect(pending.started).toBeGreaterThan(100);
      const after = (await (
        await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"query":"{ user(id: \\"9\\") { id } }"}',
        })
      ).json()) as { data?: unknown };
      expect(after.data).toBeDefined();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await cache.close();
    }
  });

  it('Apollo Server 5: the same', async () => {
    const { cache, schema, pending, context, random, abandoned } = app(11);
    const server = new ApolloServer<ReturnType<typeof context>>({ schema, plugins: [herdcachePlugin({ cache })] });
    const { url } = await startStandaloneServer(server, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req, res }) => context(req.headers['x-session'] as string | undefined, clientLeft(res)),
    });
    try {
      const outcome = await storm(url, random, 400);
      await settled(pending, () => cache.inFlight);
      expect({ pending: pending.count, inFlight: cache.inFlight, unanswered: outcome.unanswered }).toEqual({
        pending: 0,
        inFlight: 0,
        unanswered: [],
      });
      expect(outcome.aborted).toBeGreaterThan(40);
      expect(outcome.answered).toBeGreaterThan(100);
      expect(abandoned.fills).toBeGreaterThan(0);
    } finally {
      await server.stop();
      await cache.close();
    }
  });
});

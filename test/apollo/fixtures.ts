/** An Apollo Server over a small schema using @cached, a loader in context, and the herdcache plugin. */
import { ApolloServer, type GraphQLResponse } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { Registry } from 'prom-client';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { type Cache, createCache } from '../../src/core/cache';
import { type CacheReport, cachedDirectiveTransformer, herdcacheContext } from '../../src/graphql';
import type { Store } from '../../src/core/store';
import { callCounter, makeSchema } from '../graphql/fixtures';

export const typeDefs = `
  type Query {
    hot: Hot @cached(ttl: 60)
    ping: Int
    me(n: Int!): Secret @cached(ttl: 60, scope: PRIVATE)
    user(id: ID!): User
    users(ids: [ID!]!): [User!]!
    fail(code: String!): String @cached(ttl: 60)
  }
  type Mutation { touch: Int }
  type Hot { value: Int! }
  type Secret { owner: String, n: Int! }
  type User { id: ID!, name: String!, score: Int! @cached(ttl: 60) }
`;

export interface Session {
  session?: string;
}

export interface FixtureOptions {
  cache?: Cache;
  store?: Store;
  extensions?: boolean;
  registry?: Registry;
  maxOperationLabels?: number;
  /** Resolves when the `hot` resolver may return (default: at once). */
  hotGate?: () => Promise<void>;
  /** Called by `ping`, which a query lists after `hot`: by then that operation's `hot` load is registered. */
  onPing?: () => void;
}

export function fixture(options: FixtureOptions = {}) {
  const counter = callCounter();
  const cache = options.cache ?? createCache({ ttl: Infinity, store: options.store });
  const userLoader = cache.loader<string, { id: string; name: string }>({
    name: 'user',
    batch: (ids) => {
      counter.count('user.batch');
      return ids.map((id) => ({ id, name: `user ${id}` }));
    },
  });
  const schema = makeSchema(typeDefs, {
    Query: {
      hot: async () => {
        counter.count('hot');
        await options.hotGate?.();
        return { value: 42 };
      },
      ping: () => {
        counter.count('ping');
        options.onPing?.();
        return 1;
      },
      me: (_p, { n }, ctx: Session) => {
        counter.count(`me:${ctx.session ?? ''}:${n}`);
        return { owner: ctx.session ?? null, n };
      },
      user: (_p, { id }, ctx) => ctx.loaders.user.load(id),
      users: (_p, { ids }, ctx) => ctx.loaders.user.loadMany(ids),
      fail: (_p, { code }) => {
        counter.count('fail');
        throw new GraphQLError(`failed with ${code}`, { extensions: { code, retryable: false } });
      },
    },
    User: {
      score: (user) => {
        counter.count(`score:${user.id}`);
        return Number(user.id) * 10;
      },
    },
  });
  cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: Session) => ctx.session });
  const plugin = herdcachePlugin<Session>({
    cache,
    extensions: options.extensions,
    registry: options.registry,
    maxOperationLabels: options.maxOperationLabels,
  });
  const server = new ApolloServer<Session>({ schema, plugins: [plugin] });
  const loaders = { user: userLoader };
  /** A context as an app's context function would build it. */
  const context = (session?: string) => ({ ...herdcacheContext({ cache, loaders }), session });
  return { cache, server, counter, context, loaders, schema };
}

export function single(response: GraphQLResponse) {
  if (response.body.kind !== 'single') throw new Error('expected a single result');
  return response.body.singleResult;
}

export function reportOf(result: { extensions?: Record<string, unknown> }): CacheReport {
  const report = result.extensions?.cache as CacheReport | undefined;
  if (report === undefined) throw new Error(`no extensions.cache in ${JSON.stringify(result)}`);
  return report;
}

export function zeros() {
  return { hits: 0, misses: 0, coalesced: 0, staleServed: 0, fills: 0, fillFailures: 0, lockContended: 0, bypassed: 0 };
}

/** An Apollo Server 5 with herdcachePlugin over HTTP on 127.0.0.1 (the session from `x-session`), as test/envelop/serve.ts is for Yoga. */
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import type { GraphQLSchema } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import type { Cache } from '../../src/core/cache';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';

export type SessionContext = { session?: string };

export async function serveApollo(
  schema: GraphQLSchema,
  cache: Cache,
  responseCache: true | ResponseCacheOptions<SessionContext>,
  plugins: ApolloServerPlugin<SessionContext>[] = [],
): Promise<{ url: string; stop: () => Promise<void> }> {
  const server = new ApolloServer<SessionContext>({
    schema,
    plugins: [herdcachePlugin<SessionContext>({ cache, extensions: true, responseCache }), ...plugins],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) =>
      typeof req.headers['x-session'] === 'string' ? { session: req.headers['x-session'] } : {},
  });
  return { url, stop: () => server.stop() };
}

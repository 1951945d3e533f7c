/** A GraphQL Yoga 5 server with useHerdcache over the response fixture, on 127.0.0.1 (the session from `x-session`). */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createYoga, type Plugin } from 'graphql-yoga';
import { useHerdcache } from '../../src/envelop/plugin';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import type { ResponseFixture } from '../graphql/response-fixture';

export async function serveYoga(
  f: ResponseFixture,
  responseCache: true | ResponseCacheOptions = { sessionId: (ctx) => ctx.session },
  before: Plugin[] = [],
): Promise<{ url: string; stop: () => Promise<void> }> {
  const yoga = createYoga({
    schema: f.schema,
    plugins: [...before, useHerdcache({ cache: f.cache, extensions: true, responseCache })],
    context: ({ request }) => {
      const session = request.headers.get('x-session');
      return session === null ? {} : { session };
    },
    logging: false,
    maskedErrors: false,
  });
  const server = createServer((req, res) => void yoga(req, res));
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

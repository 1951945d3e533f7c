/**
 * Yoga 5: a run apart (a background refresh) is not the request's execution: the request's abort
 * signal (Yoga's useExecutionCancellation puts it in the execution's arguments) does not cancel
 * it. A client that goes away once it has its stale response is the common case, and a refresh
 * cancelled with it was never stored: the response stayed stale, refreshed and cancelled again.
 */
import { createYoga, useExecutionCancellation } from 'graphql-yoga';
import { createCache, manualClock } from '../../src/core';
import { useHerdcache } from '../../src/envelop';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { version: Int @cacheControl(maxAge: 10) }
`;
type Result = { data: { version: number }; extensions: { cache: { response: string } } };

it('yoga: a refresh runs to its end when the stale request that started it is aborted', async () => {
  const clock = manualClock();
  const cache = createCache({ clock });
  let executions = 0;
  let open: () => void = () => {};
  const schema = makeSchema(typeDefs, {
    Query: {
      version: async () => {
        const version = ++executions;
        if (version > 1) await new Promise<void>((resolve) => (open = resolve)); // the refresh waits
        return version;
      },
    },
  });
  const yoga = createYoga({
    schema,
    plugins: [useExecutionCancellation(), useHerdcache({ cache, extensions: true, responseCache: { swr: 60 } })],
    logging: false,
  });
  const ask = async (signal?: AbortSignal) => {
    const response = await yoga.fetch('http://yoga/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ version }' }),
      signal,
    });
    const result = (await response.json()) as Result;
    return `v${result.data.version} (${result.extensions.cache.response})`;
  };
  try {
    expect(await ask()).toBe('v1 (miss)');
    clock.advance(11_000); // past maxAge, within swr
    const client = new AbortController();
    expect(await ask(client.signal)).toBe('v1 (stale)'); // its refresh is running
    await until(() => executions === 2, 'the refresh');
    client.abort(); // the client goes away: its request is over
    open();
    await until(() => cache.inFlight === 0, 'the refresh to end');
    expect(await ask()).toBe('v2 (hit)');
    expect(executions).toBe(2);
  } finally {
    await cache.close();
  }
});

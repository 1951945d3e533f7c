/**
 * On Yoga 5 with batching and useExecutionCancellation: a client sends the same operation twice in
 * one batch, other clients wait on its execution, and the first client goes away. Its execution is
 * cancelled, so its result cannot be shared; the waiters contend once more. Before, the batch's
 * second operation (the gone client's) led that second round, was cancelled in turn, and every
 * other waiter then executed for itself, storing nothing (14 executions for 7 such batches). A
 * request whose client is gone no longer contends again: one live waiter executes for the others.
 */
import { buildSchema } from 'graphql';
import { createYoga, useExecutionCancellation } from 'graphql-yoga';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { until } from '../graphql/response-fixture';

it('a batch whose client leaves while others wait on its execution: one more execution, not one per waiter', async () => {
  const schema = buildSchema(`
    directive @cacheControl(maxAge: Int) on FIELD_DEFINITION
    type Query { a: String @cacheControl(maxAge: 30) }
  `);
  let executions = 0;
  let running = 0;
  schema.getQueryType()!.getFields().a!.resolve = async () => {
    executions++;
    running++;
    await new Promise((resolve) => setTimeout(resolve, 100));
    running--;
    return 'A';
  };
  const cache = createCache();
  const yoga = createYoga({
    schema,
    logging: false,
    batching: true,
    plugins: [useExecutionCancellation(), useHerdcache({ cache, extensions: true, responseCache: true })],
  });
  const batch = (signal?: AbortSignal) =>
    yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ query: '{ a }' }, { query: '{ a }' }]),
      signal,
    });
  const leaving = new AbortController();
  const first = Promise.resolve(batch(leaving.signal)).catch(() => 'left');
  await until(() => executions === 1, 'the first execution');
  const others = Array.from({ length: 6 }, () => batch());
  await until(() => cache.metrics().total.coalesced === 13, 'every other operation waiting on it');
  leaving.abort();
  const bodies = await Promise.all(
    others.map(
      async (response) =>
        (await (await response).json()) as { data?: { a: string }; extensions?: { cache?: { response?: string } } }[],
    ),
  );
  await first;
  for (const body of bodies) for (const answer of body) expect(answer.data?.a).toBe('A');
  const outcomes = bodies.flat().map((answer) => answer.extensions?.cache?.response);
  expect(outcomes.filter((outcome) => outcome === 'coalesced').length).toBeGreaterThanOrEqual(11);
  expect(executions).toBeLessThanOrEqual(2);
  await until(() => running === 0, 'the executions ended');
  // Stored: the next request is a hit.
  const next = await (await yoga.fetch('http://localhost/graphql?query=%7Ba%7D')).json();
  expect((next as { extensions?: { cache?: { response?: string } } }).extensions?.cache?.response).toBe('hit');
  await cache.close();
});

/**
 * A PUBLIC operation whose resolver makes a signed-in viewer's answer PRIVATE (a runtime hint): a
 * signed-in viewer's execution cannot be shared, and its waiters contend once more. Before, the
 * first in line led that second round; when it was signed in too, its answer could not be shared
 * either, and every other waiter executed for itself, storing nothing (31 executions for 31
 * requests in a tarball review, decided by arrival order). Now the signed-in waiters execute for
 * themselves (their answers are their own), and the anonymous ones share one execution, stored.
 */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { makeSchema } from '../graphql/fixtures';
import { until } from '../graphql/response-fixture';

type Context = { session?: string };
type Info = { cacheControl?: { setCacheHint(hint: object): void } };

it('signed-in waiters first in line: they execute for themselves, the anonymous share one execution', async () => {
  let executions = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const schema = makeSchema(
    `
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
    type Query { greeting: String @cacheControl(maxAge: 60) }
  `,
    {
      Query: {
        greeting: async (_p: unknown, _a: unknown, context: Context, info: unknown) => {
          const execution = ++executions;
          if (context.session !== undefined) (info as Info).cacheControl?.setCacheHint({ scope: 'PRIVATE' });
          if (execution === 1) await gate;
          return context.session === undefined ? 'hello' : `hello ${context.session}`;
        },
      },
    },
  );
  const cache = createCache();
  const server = new ApolloServer<Context>({
    schema,
    plugins: [
      herdcachePlugin<Context>({
        cache,
        extensions: true,
        responseCache: { sessionId: (context) => context.session },
      }),
    ],
  });
  await server.start();
  const ask = async (session?: string) => {
    const response = await server.executeOperation(
      { query: '{ greeting }' },
      { contextValue: session === undefined ? {} : { session } },
    );
    const result = (
      response.body as unknown as {
        singleResult: {
          data: { greeting: string };
          extensions: { cache: { response: string; notStoredReason?: string } };
        };
      }
    ).singleResult;
    return { greeting: result.data.greeting, response: result.extensions.cache.response };
  };
  try {
    const leader = ask('ann');
    await until(() => executions === 1, 'the signed-in leader executing');
    const signedIn = ['bob', 'cid', 'dee'].map((session) => ask(session)); // first in line
    const anonymous = Array.from({ length: 10 }, () => ask());
    await until(() => cache.metrics().total.coalesced === 13, 'every other request waiting on it');
    open();
    expect((await leader).greeting).toBe('hello ann');
    const signedAnswers = await Promise.all(signedIn);
    expect(signedAnswers.map((answer) => answer.greeting)).toEqual(['hello bob', 'hello cid', 'hello dee']);
    const anonymousAnswers = await Promise.all(anonymous);
    for (const answer of anonymousAnswers) expect(answer.greeting).toBe('hello');
    const outcomes = anonymousAnswers.map((answer) => answer.response).sort();
    expect(outcomes).toEqual([...Array(9).fill('coalesced'), 'miss']);
    expect(executions).toBe(5); // ann, bob, cid, dee, and one for the anonymous
    expect((await ask()).response).toBe('hit'); // stored
  } finally {
    open();
    await server.stop();
    await cache.close();
  }
});

/**
 * The shared execution invalidated while it runs: its waiters' re-execution runs apart, on a
 * waiting request's context. Lent a signed-in viewer's, it was made PRIVATE and shared with nobody
 * (6 executions for 11 requests in a review, when a signed-in waiter was first in line); an
 * anonymous waiter's context is lent first now: one re-execution, shared with all.
 */
it('an invalidation during the shared execution: the re-execution runs on an anonymous waiter’s context', async () => {
  let executions = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const schema = makeSchema(
    `
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
    type Query { hello: Hello @cacheControl(maxAge: 60) }
    type Hello @cacheControl(maxAge: 60) { id: ID!, text: String }
  `,
    {
      Query: {
        hello: async (_p: unknown, _a: unknown, context: Context, info: unknown) => {
          const execution = ++executions;
          if (context.session !== undefined) (info as Info).cacheControl?.setCacheHint({ scope: 'PRIVATE' });
          if (execution === 1) await gate;
          return { id: '1', text: context.session === undefined ? 'hello' : `hello ${context.session}` };
        },
      },
    },
  );
  const cache = createCache();
  const server = new ApolloServer<Context>({
    schema,
    plugins: [
      herdcachePlugin<Context>({ cache, extensions: true, responseCache: { sessionId: (context) => context.session } }),
    ],
  });
  await server.start();
  const ask = async (session?: string) => {
    const response = await server.executeOperation(
      { query: '{ hello { id text } }' },
      { contextValue: session === undefined ? {} : { session } },
    );
    const result = (response.body as unknown as { singleResult: { data: { hello: { text: string } } } }).singleResult;
    return result.data.hello.text;
  };
  try {
    const leader = ask();
    await until(() => executions === 1, 'the anonymous leader executing');
    const waiting = [
      ...['bob', 'cid', 'dee'].map((session) => ask(session)),
      ...Array.from({ length: 7 }, () => ask()),
    ];
    await until(() => cache.metrics().total.coalesced === 10, 'every other request waiting on it');
    await cache.invalidateTags(['Hello:1']); // while it runs: its result predates this
    open();
    expect(await leader).toBe('hello');
    const answers = await Promise.all(waiting);
    for (const answer of answers) expect(answer).toBe('hello'); // the key is PUBLIC: the anonymous answer, for all
    expect(executions).toBe(2);
  } finally {
    open();
    await server.stop();
    await cache.close();
  }
});

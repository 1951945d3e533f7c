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

/**
 * An Apollo server whose one root field (`hello: Hello`, entity `Hello:1`) makes a signed-in
 * viewer's answer PRIVATE at run time; its first execution waits for `open()`.
 */
async function helloServer() {
  const state = { executions: 0 };
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
          const execution = ++state.executions;
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
  /** The answer's text and its `extensions.cache.response`. */
  const ask = async (session?: string) => {
    const response = await server.executeOperation(
      { query: '{ hello { id text } }' },
      { contextValue: session === undefined ? {} : { session } },
    );
    const result = (
      response.body as unknown as {
        singleResult: { data: { hello: { text: string } }; extensions: { cache: { response: string } } };
      }
    ).singleResult;
    return { text: result.data.hello.text, response: result.extensions.cache.response };
  };
  const stop = async () => {
    open();
    await server.stop();
    await cache.close();
  };
  return { state, open, cache, ask, stop };
}

it('signed-in waiters first in line: they execute for themselves, the anonymous share one execution', async () => {
  const { state, open, cache, ask, stop } = await helloServer();
  try {
    const leader = ask('ann');
    await until(() => state.executions === 1, 'the signed-in leader executing');
    const signedIn = ['bob', 'cid', 'dee'].map((session) => ask(session)); // first in line
    const anonymous = Array.from({ length: 10 }, () => ask());
    await until(() => cache.metrics().total.coalesced === 13, 'every other request waiting on it');
    open();
    expect((await leader).text).toBe('hello ann');
    const signedAnswers = await Promise.all(signedIn);
    expect(signedAnswers.map((answer) => answer.text)).toEqual(['hello bob', 'hello cid', 'hello dee']);
    const anonymousAnswers = await Promise.all(anonymous);
    for (const answer of anonymousAnswers) expect(answer.text).toBe('hello');
    const outcomes = anonymousAnswers.map((answer) => answer.response).sort();
    expect(outcomes).toEqual([...Array(9).fill('coalesced'), 'miss']);
    expect(state.executions).toBe(5); // ann, bob, cid, dee, and one for the anonymous
    expect((await ask()).response).toBe('hit'); // stored
  } finally {
    await stop();
  }
});

/**
 * The shared execution invalidated while it runs: its waiters' re-execution runs apart, on a
 * waiting request's context. Lent a signed-in viewer's, it was made PRIVATE and shared with nobody
 * (6 executions for 11 requests in a review, when a signed-in waiter was first in line); an
 * anonymous waiter's context is lent first now: one re-execution, shared with all.
 */
it('an invalidation during the shared execution: the re-execution runs on an anonymous waiter’s context', async () => {
  const { state, open, cache, ask, stop } = await helloServer();
  try {
    const leader = ask();
    await until(() => state.executions === 1, 'the anonymous leader executing');
    const waiting = [
      ...['bob', 'cid', 'dee'].map((session) => ask(session)),
      ...Array.from({ length: 7 }, () => ask()),
    ];
    await until(() => cache.metrics().total.coalesced === 10, 'every other request waiting on it');
    await cache.invalidateTags(['Hello:1']); // while it runs: its result predates this
    open();
    expect((await leader).text).toBe('hello');
    const answers = await Promise.all(waiting);
    for (const answer of answers) expect(answer.text).toBe('hello'); // the key is PUBLIC: the anonymous answer, for all
    expect(state.executions).toBe(2);
  } finally {
    await stop();
  }
});

/**
 * A PUBLIC operation whose resolver makes a signed-in viewer's answer PRIVATE (a runtime hint), with
 * `sessionId`: signed-in and anonymous requests have keys of their own (Apollo's AuthenticatedPublic
 * and NoSession), so neither is given the other's answer. A signed-in viewer's execution cannot be
 * shared: the signed-in requests waiting on it execute for themselves (their answers are their own;
 * leading another round, each would be made PRIVATE too: 31 executions for 31 requests in a tarball
 * review, before); the anonymous ones share one execution, stored.
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

it('signed-in waiters execute for themselves; the anonymous ones share one execution of their own key', async () => {
  const { state, open, cache, ask, stop } = await helloServer();
  try {
    const leader = ask('ann');
    await until(() => state.executions === 1, 'the signed-in leader executing');
    const signedIn = ['bob', 'cid', 'dee'].map((session) => ask(session)); // waiting on ann's execution
    await until(() => cache.metrics().total.coalesced === 3, 'the signed-in requests waiting on it');
    const anonymous = Array.from({ length: 10 }, () => ask()); // another key: one of them executes
    const anonymousAnswers = await Promise.all(anonymous);
    for (const answer of anonymousAnswers) expect(answer.text).toBe('hello');
    expect(anonymousAnswers.map((answer) => answer.response).sort()).toEqual([...Array(9).fill('coalesced'), 'miss']);
    expect(state.executions).toBe(2);
    open();
    expect((await leader).text).toBe('hello ann');
    const signedAnswers = await Promise.all(signedIn);
    expect(signedAnswers.map((answer) => answer.text)).toEqual(['hello bob', 'hello cid', 'hello dee']);
    expect(state.executions).toBe(5); // ann, the anonymous ones, bob, cid, dee
    expect((await ask()).response).toBe('hit'); // the anonymous answer, stored
    const again = await ask('bob');
    expect(again).toEqual({ text: 'hello bob', response: 'miss' }); // never the anonymous answer
  } finally {
    await stop();
  }
});

/**
 * The shared execution invalidated while it runs: its waiters' re-execution runs apart, on a
 * waiting request's context. Waiters of an anonymous key are all anonymous: one re-execution,
 * shared with all of them; the signed-in requests, on their own key, each get their own answer.
 */
it('an invalidation during the shared execution: one re-execution for its anonymous waiters; signed-in requests get their own', async () => {
  const { state, open, cache, ask, stop } = await helloServer();
  try {
    const leader = ask();
    await until(() => state.executions === 1, 'the anonymous leader executing');
    const anonymous = Array.from({ length: 7 }, () => ask());
    await until(() => cache.metrics().total.coalesced === 7, 'the anonymous requests waiting on it');
    await cache.invalidateTags(['Hello:1']); // while it runs: its result predates this
    const signedIn = await Promise.all(['bob', 'cid', 'dee'].map((session) => ask(session)));
    expect(signedIn.map((answer) => answer.text)).toEqual(['hello bob', 'hello cid', 'hello dee']);
    open();
    expect((await leader).text).toBe('hello');
    for (const answer of await Promise.all(anonymous)) expect(answer.text).toBe('hello');
    // The leader, one re-execution for the anonymous waiters, and bob's (cid and dee waited on it,
    // then executed for themselves: a signed-in answer is never shared).
    expect(state.executions).toBe(5);
  } finally {
    await stop();
  }
});

/**
 * With `responseCache.sessionId`, a PUBLIC operation is keyed by whether the request has a session
 * (Apollo's response cache: NoSession and AuthenticatedPublic). A review found signed-in viewers
 * given the stored anonymous answer of an operation whose resolvers hint PRIVATE for them through
 * Apollo's own `info.cacheControl.setCacheHint` (at the root and on a nested field): 1,495 of 9,019
 * randomized responses, where Apollo's response cache gave none.
 */
import { ApolloServer } from '@apollo/server';
import type { GraphQLResolveInfo } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { makeSchema } from '../graphql/fixtures';

type Context = { session?: string };
type Info = GraphQLResolveInfo & { cacheControl: { setCacheHint(hint: { scope: 'PRIVATE' }): void } };
type Result = { data: Record<string, unknown>; extensions: { cache: { response: string; notStoredReason?: string } } };

const viewer = (context: Context, info: GraphQLResolveInfo) => {
  if (context.session !== undefined) (info as Info).cacheControl.setCacheHint({ scope: 'PRIVATE' });
  return context.session ?? 'anonymous';
};

async function server(sessionId: boolean) {
  const executions = { root: 0, plain: 0 };
  const schema = makeSchema(
    `
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
    type Query {
      greeting: String @cacheControl(maxAge: 60)
      item: Item @cacheControl(maxAge: 60)
      plain: String @cacheControl(maxAge: 60)
    }
    type Item @cacheControl(maxAge: 60) { id: ID!, viewer: String @cacheControl(maxAge: 60) }
  `,
    {
      Query: {
        greeting: (_p: unknown, _a: unknown, context: Context, info: GraphQLResolveInfo) => {
          executions.root++;
          return `hello ${viewer(context, info)}`;
        },
        item: () => ({ id: '1' }),
        plain: () => `plain ${++executions.plain}`,
      },
      Item: { viewer: (_p: unknown, _a: unknown, context: Context, info: GraphQLResolveInfo) => viewer(context, info) },
    },
  );
  const cache = createCache();
  const apollo = new ApolloServer<Context>({
    schema,
    plugins: [
      herdcachePlugin<Context>({
        cache,
        extensions: true,
        responseCache: sessionId ? { sessionId: (context) => context.session } : true,
      }),
    ],
  });
  await apollo.start();
  const ask = async (query: string, session?: string) => {
    const response = await apollo.executeOperation(
      { query },
      { contextValue: session === undefined ? {} : { session } },
    );
    const result = (response.body as unknown as { singleResult: Result }).singleResult;
    return {
      data: result.data,
      response: result.extensions.cache.response,
      header: response.http.headers.get('cache-control'),
    };
  };
  const stop = async () => {
    await apollo.stop();
    await cache.close();
  };
  return { executions, ask, stop };
}

it('a root field hinted PRIVATE for signed-in viewers: each gets its own answer, never the stored anonymous one', async () => {
  const { executions, ask, stop } = await server(true);
  try {
    expect(await ask('{ greeting }')).toMatchObject({ data: { greeting: 'hello anonymous' }, response: 'miss' });
    expect(await ask('{ greeting }')).toMatchObject({ data: { greeting: 'hello anonymous' }, response: 'hit' });
    for (const session of ['alice', 'alice', 'bob'])
      expect(await ask('{ greeting }', session)).toEqual({
        data: { greeting: `hello ${session}` },
        response: 'miss',
        header: 'max-age=60, private',
      });
    expect(executions.root).toBe(4);
    expect(await ask('{ greeting }')).toMatchObject({ data: { greeting: 'hello anonymous' }, response: 'hit' });
  } finally {
    await stop();
  }
});

it('a nested field hinted PRIVATE for signed-in viewers: the same', async () => {
  const { ask, stop } = await server(true);
  try {
    await ask('{ item { id viewer } }');
    expect(await ask('{ item { id viewer } }')).toMatchObject({ response: 'hit' });
    expect(await ask('{ item { id viewer } }', 'alice')).toMatchObject({
      data: { item: { id: '1', viewer: 'alice' } },
      response: 'miss',
    });
  } finally {
    await stop();
  }
});

it('a PUBLIC answer without hints: shared by the signed-in viewers, apart from the anonymous ones', async () => {
  const { executions, ask, stop } = await server(true);
  try {
    expect((await ask('{ plain }')).data).toEqual({ plain: 'plain 1' });
    expect(await ask('{ plain }', 'alice')).toMatchObject({ data: { plain: 'plain 2' }, response: 'miss' });
    expect(await ask('{ plain }', 'bob')).toMatchObject({ data: { plain: 'plain 2' }, response: 'hit' });
    expect(await ask('{ plain }')).toMatchObject({ data: { plain: 'plain 1' }, response: 'hit' });
    expect(executions.plain).toBe(2);
  } finally {
    await stop();
  }
});

it('without sessionId no request is known to be signed in: one key for all (the documented trade)', async () => {
  const { ask, stop } = await server(false);
  try {
    await ask('{ greeting }');
    expect(await ask('{ greeting }', 'alice')).toMatchObject({
      data: { greeting: 'hello anonymous' },
      response: 'hit',
    });
  } finally {
    await stop();
  }
});

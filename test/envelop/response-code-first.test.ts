/**
 * A schema built in code, its @cached hints in `extensions.directives` (graphql-tools' and Pothos'
 * forms, docs/graphql.md "Code-first schemas"), under the response layer on Yoga 5: the response
 * policy reads them as the field layer does. A PRIVATE @cached field makes the operation PRIVATE
 * (cached per session, `private` in the header), never one viewer's answer served to the others;
 * a @cached ttl caps the response's maxAge.
 */
import { GraphQLObjectType, GraphQLSchema, GraphQLString, specifiedDirectives } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { cachedDirectiveTransformer, herdcacheContext, herdcacheDirectives } from '../../src/graphql';

type Context = { uid?: string };

function serve(directives: unknown) {
  const cache = createCache();
  let calls = 0;
  const schema = new GraphQLSchema({
    directives: [...specifiedDirectives, ...herdcacheDirectives],
    query: new GraphQLObjectType<unknown, Context>({
      name: 'Query',
      fields: {
        myEmail: {
          type: GraphQLString,
          extensions: { directives } as never,
          resolve: (_p, _a, ctx) => {
            calls++;
            return `${ctx.uid}@example.com`;
          },
        },
      },
    }),
  });
  cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: Context) => ctx.uid });
  const yoga = createYoga<Context>({
    schema,
    logging: false,
    context: ({ request }) => ({ ...herdcacheContext({ cache }), uid: request.headers.get('x-user') ?? undefined }),
    plugins: [
      useHerdcache<Context>({
        cache,
        extensions: true,
        responseCache: { sessionId: (ctx) => ctx.uid, defaultMaxAge: 60 },
      }),
    ],
  });
  const ask = async (user: string) => {
    const response = await yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user': user },
      body: JSON.stringify({ query: '{ myEmail }' }),
    });
    const body = (await response.json()) as { data: { myEmail: string }; extensions: { cache: { response: string } } };
    return {
      email: body.data.myEmail,
      header: response.headers.get('cache-control'),
      response: body.extensions.cache.response,
    };
  };
  return { ask, calls: () => calls };
}

describe.each<[string, unknown]>([
  ['an object of arguments (graphql-tools)', { cached: { ttl: 60, scope: 'PRIVATE' } }],
  ['a list of argument objects', { cached: [{ ttl: 60, scope: 'PRIVATE' }] }],
  ['a list of uses (Pothos)', [{ name: 'cached', args: { ttl: 60, scope: 'PRIVATE' } }]],
])('@cached(scope: PRIVATE) given as %s', (_form, directives) => {
  it('each viewer gets their own answer, cached per session, with a private header', async () => {
    const { ask, calls } = serve(directives);
    for (const user of ['alice', 'bob', 'carol']) {
      const answer = await ask(user);
      expect(answer).toEqual({ email: `${user}@example.com`, header: 'max-age=60, private', response: 'miss' });
    }
    expect(await ask('bob')).toEqual({ email: 'bob@example.com', header: 'max-age=60, private', response: 'hit' });
    expect(calls()).toBe(3);
  });
});

it('a @cached ttl in extensions caps the response maxAge', async () => {
  const { ask } = serve({ cached: { ttl: 10 } });
  expect(await ask('alice')).toMatchObject({ header: 'max-age=10, public', response: 'miss' });
  expect(await ask('bob')).toMatchObject({ email: 'alice@example.com', header: 'max-age=10, public', response: 'hit' });
});

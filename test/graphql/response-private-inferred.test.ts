/**
 * The response layer's static policy reads a field as PRIVATE wherever the field layer does, so a
 * response is never more public than a field it holds (Yoga has no run-time hint to catch it):
 * - a @cached field whose value @cacheControl says is the viewer's (a PRIVATE field of its type,
 *   even one the query does not select: the cached value is the whole object);
 * - an interface's field that says PUBLIC, resolved by an implementation whose field says PRIVATE
 *   (the implementation's hint wins: Apollo reads it at run time).
 * Before, both were stored PUBLIC on Yoga: a tarball review saw a second viewer and an anonymous
 * client answered with the first viewer's data (2 leaks in 3 requests, each case).
 */
import { parse } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { cachedDirectiveTransformer } from '../../src/graphql';
import { operationPolicy } from '../../src/graphql/response-policy';
import { makeSchema } from './fixtures';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query {
    me: Viewer @cached(ttl: 60) @cacheControl(maxAge: 60)
    plain: Viewer @cacheControl(maxAge: 60)
    item: Item @cacheControl(maxAge: 60)
  }
  type Viewer @cacheControl(maxAge: 60) { id: ID!, name: String, email: String @cacheControl(scope: PRIVATE) }
  interface Item { id: ID!, secret: String @cacheControl(scope: PUBLIC) }
  type Mine implements Item @cacheControl(maxAge: 60) { id: ID!, secret: String @cacheControl(scope: PRIVATE) }
`;

type Context = { user?: string };

function schema() {
  const built = makeSchema(typeDefs, {
    Query: {
      me: (_p, _a, ctx: Context) => ({ id: `v-${ctx.user}`, name: `name of ${ctx.user}`, email: `${ctx.user}@x` }),
      plain: () => ({ id: 'p', name: 'plain' }),
      item: (_p, _a, ctx: Context) => ({ __typename: 'Mine', id: 'm', secret: `secret of ${ctx.user}` }),
    },
  });
  return built;
}

const policyOf = (query: string) => {
  const policy = operationPolicy(schema(), parse(query), undefined, 0);
  return typeof policy === 'string' ? policy : policy.scope;
};

it('reads PRIVATE where the field layer does: a @cached viewer, an implementation’s PRIVATE field', () => {
  expect(policyOf('{ me { id name } }')).toBe('PRIVATE');
  expect(policyOf('{ item { id secret } }')).toBe('PRIVATE');
  // Without @cached, the same object read field by field is PUBLIC by Apollo's rules (email not selected).
  expect(policyOf('{ plain { id name } }')).toBe('PUBLIC');
});

it.each(['{ me { id name } }', '{ item { id secret } }'])(
  'on Yoga, %s: each viewer is answered with its own data, and an anonymous client with none of theirs',
  async (query) => {
    const cache = createCache();
    const built = schema();
    cachedDirectiveTransformer(built, { cache, sessionId: (ctx: Context) => ctx.user });
    const yoga = createYoga<Context>({
      schema: built,
      logging: false,
      context: ({ request }) => {
        const user = request.headers.get('x-user');
        return user === null ? {} : { user };
      },
      plugins: [useHerdcache<Context>({ cache, extensions: true, responseCache: { sessionId: (ctx) => ctx.user } })],
    });
    const ask = async (user?: string) => {
      const response = await yoga.fetch('http://localhost/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(user === undefined ? {} : { 'x-user': user }) },
        body: JSON.stringify({ query }),
      });
      return { text: JSON.stringify(await response.json()), cacheControl: response.headers.get('cache-control') };
    };
    const u1 = await ask('u1');
    const u2 = await ask('u2');
    const anonymous = await ask();
    expect(u1.text).toContain('u1');
    expect(u1.cacheControl ?? '').not.toMatch(/public/);
    expect(u2.text).not.toContain('u1');
    expect(anonymous.text).not.toContain('u1');
    expect(anonymous.text).not.toContain('u2');
    await cache.close();
  },
);

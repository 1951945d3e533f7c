/**
 * A PRIVATE object type behind an interface or union field makes the operation PRIVATE in the
 * response layer (stricter than Apollo's rule, which reads only the abstract type's hint): one
 * viewer's answer is never stored for another, and the header says `private`, on Apollo 5 and
 * Yoga 5. Counted: what each viewer is answered, and the header.
 */
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { createYoga } from 'graphql-yoga';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { makeSchema } from './fixtures';

const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query {
    item: Item @cacheControl(maxAge: 60)
    thing: Thing @cacheControl(maxAge: 60)
    open: Open @cacheControl(maxAge: 60)
    note: Note @cacheControl(maxAge: 60)
    extended: Ext @cacheControl(maxAge: 60)
  }
  interface Item { id: ID! }
  type Pub implements Item @cacheControl(maxAge: 60) { id: ID! }
  type Secret implements Item @cacheControl(maxAge: 60, scope: PRIVATE) { id: ID!, text: String }
  union Thing = Pub | Secret
  interface Open { id: ID! }
  type OpenA implements Open @cacheControl(maxAge: 60) { id: ID! }
  interface Note { id: ID!, text: String }
  type Hidden implements Note @cacheControl(maxAge: 60) { id: ID!, text: String @cacheControl(scope: PRIVATE) }
  interface Ext { id: ID! }
  type Extended implements Ext { id: ID!, text: String }
  extend type Extended @cacheControl(maxAge: 60, scope: PRIVATE)
`;

type Context = { user?: string };

function schema(calls: { n: number }) {
  const secret = (ctx: Context) => {
    calls.n++;
    return { __typename: 'Secret', id: 's', text: `secret of ${ctx.user}` };
  };
  return makeSchema(typeDefs, {
    Query: {
      item: (_p, _a, ctx: Context) => secret(ctx),
      thing: (_p, _a, ctx: Context) => secret(ctx),
      open: () => (calls.n++, { __typename: 'OpenA', id: 'a' }),
      note: (_p, _a, ctx: Context) => (calls.n++, { __typename: 'Hidden', id: 'h', text: `secret of ${ctx.user}` }),
      extended: (_p, _a, ctx: Context) => (
        calls.n++,
        { __typename: 'Extended', id: 'e', text: `secret of ${ctx.user}` }
      ),
    },
  });
}

const QUERIES = [
  '{ item { id ... on Secret { text } } }',
  '{ thing { ... on Secret { id text } } }',
  // A PRIVATE field of an implementation, selected through the interface.
  '{ note { id text } }',
  // A PRIVATE hint on an `extend type`.
  '{ extended { ... on Extended { id text } } }',
];
const responseCache = { sessionId: (ctx: Context) => ctx.user };

type Ask = (query: string, user: string) => Promise<{ data: unknown; header: string | null; response?: string }>;

async function apollo(calls: { n: number }, cacheControlFirst = false): Promise<{ ask: Ask; stop(): Promise<void> }> {
  const cache = createCache();
  const herdcache = herdcachePlugin<Context>({ cache, responseCache, extensions: true });
  const server = new ApolloServer<Context>({
    schema: schema(calls),
    // Apollo's cache-control plugin before herdcache's: it writes the header first.
    plugins: cacheControlFirst ? [ApolloServerPluginCacheControl({ defaultMaxAge: 0 }), herdcache] : [herdcache],
  });
  await server.start();
  const ask: Ask = async (query, user) => {
    const response = await server.executeOperation({ query }, { contextValue: { user } });
    if (response.body.kind !== 'single') throw new Error('not a single result');
    const result = response.body.singleResult as { data?: unknown; extensions?: { cache?: { response?: string } } };
    return {
      data: result.data,
      header: response.http.headers.get('cache-control') ?? null,
      response: result.extensions?.cache?.response,
    };
  };
  return { ask, stop: () => server.stop() };
}

async function yoga(calls: { n: number }): Promise<{ ask: Ask; stop(): Promise<void> }> {
  const cache = createCache();
  const server = createYoga<Context>({
    schema: schema(calls),
    plugins: [useHerdcache<Context>({ cache, responseCache, extensions: true })],
    context: ({ request }) => ({ user: request.headers.get('x-user') ?? undefined }),
    logging: false,
  });
  const ask: Ask = async (query, user) => {
    const response = await server.fetch('http://yoga/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user': user },
      body: JSON.stringify({ query }),
    });
    const body = (await response.json()) as { data?: unknown; extensions?: { cache?: { response?: string } } };
    return {
      data: body.data,
      header: response.headers.get('cache-control'),
      response: body.extensions?.cache?.response,
    };
  };
  return { ask, stop: async () => {} };
}

describe.each([
  ['apollo', apollo],
  ['apollo, its cache-control plugin listed first', (calls: { n: number }) => apollo(calls, true)],
  ['yoga', yoga],
] as const)('%s', (_name, start) => {
  it.each(QUERIES)('%s: each viewer gets their own answer, cached per viewer, and a private header', async (query) => {
    const calls = { n: 0 };
    const { ask, stop } = await start(calls);
    try {
      const alice = await ask(query, 'alice');
      const bob = await ask(query, 'bob');
      expect(JSON.stringify(alice.data)).toContain('secret of alice');
      expect(JSON.stringify(bob.data)).toContain('secret of bob');
      const again = await ask(query, 'alice');
      expect(JSON.stringify(again.data)).toContain('secret of alice');
      expect([alice.response, bob.response, again.response]).toEqual(['miss', 'miss', 'hit']);
      expect(calls.n).toBe(2);
      for (const answer of [alice, bob, again]) expect(answer.header).toBe('max-age=60, private');
    } finally {
      await stop();
    }
  });

  it('an interface none of whose types is PRIVATE stays PUBLIC: one answer for all', async () => {
    const calls = { n: 0 };
    const { ask, stop } = await start(calls);
    try {
      const first = await ask('{ open { id } }', 'alice');
      const second = await ask('{ open { id } }', 'bob');
      expect([first.response, second.response]).toEqual(['miss', 'hit']);
      expect(first.header).toBe('max-age=60, public');
      expect(calls.n).toBe(1);
    } finally {
      await stop();
    }
  });
});

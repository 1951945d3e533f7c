/**
 * @cached without a `scope:` of its own on a value that `@cacheControl(scope: PRIVATE)` says is
 * the viewer's (the field's hint, its type's, or an object type its interface or union may
 * return) is PRIVATE: cached per session, never one viewer's value for all. Without the sessionId
 * option that is a build error naming where PRIVATE comes from; `@cached(scope: PUBLIC)` is the
 * schema author's word that the value is the same for every viewer. Counted: fills per viewer.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from '../../src/graphql';
import { callCounter, makeSchema, run } from './fixtures';

const CACHE_CONTROL = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
`;

function viewerSchema(field: string) {
  const counter = callCounter();
  const name = field.slice(0, field.indexOf(':'));
  const resolvers: Record<string, (p: unknown, a: unknown, ctx: { user: string }) => unknown> = {
    me: (_p, _a, ctx) => (counter.count('me'), { name: ctx.user }),
    open: (_p, _a, ctx) => (counter.count('open'), { name: ctx.user }),
    item: (_p, _a, ctx) => (counter.count('item'), { __typename: 'Secret', name: ctx.user }),
    account: (_p, _a, ctx) => (counter.count('account'), { name: ctx.user }),
    profile: (_p, _a, ctx) => (counter.count('profile'), { name: ctx.user }),
    page: (_p, _a, ctx) => (counter.count('page'), { owner: { name: ctx.user } }),
    nested: (_p, _a, ctx) => (counter.count('nested'), { item: { __typename: 'Secret', name: ctx.user } }),
  };
  const schema = makeSchema(
    `${CACHE_CONTROL}
    type Query { ${field} }
    type User @cacheControl(scope: PRIVATE) { name: String }
    type Open { name: String }
    interface Item { name: String }
    type Secret implements Item @cacheControl(maxAge: 60, scope: PRIVATE) { name: String }
    type Plain implements Item { name: String }
    type Account { name: String }
    extend type Account @cacheControl(scope: PRIVATE)
    type Profile { name: String @cacheControl(scope: PRIVATE) }
    type Page { owner: Profile }
    type Wrapper { item: Item }`,
    { Query: { [name]: resolvers[name]! } },
  );
  return { schema, calls: counter.calls };
}

const session = (ctx: { user: string }) => ctx.user;

async function asEach(schema: ReturnType<typeof makeSchema>, query: string, cache = createCache()) {
  const names: string[] = [];
  for (const user of ['alice', 'bob', 'alice']) {
    const result = await run(schema, query, { ...herdcacheContext({ cache }), user });
    expect(result.errors).toBeUndefined();
    names.push(JSON.stringify(result.data));
  }
  return names;
}

describe('@cached and @cacheControl(scope: PRIVATE)', () => {
  it.each([
    ['its type', 'me: User @cached(ttl: 60)', '{ me { name } }', 'me'],
    ['its own hint', 'open: Open @cached(ttl: 60) @cacheControl(scope: PRIVATE)', '{ open { name } }', 'open'],
    ['an object type its interface may return', 'item: Item @cached(ttl: 60)', '{ item { name } }', 'item'],
    ['its type, on an `extend type`', 'account: Account @cached(ttl: 60)', '{ account { name } }', 'account'],
    ['a field of its type', 'profile: Profile @cached(ttl: 60)', '{ profile { name } }', 'profile'],
    [
      'a field inside its value (read by the default resolver)',
      'page: Page @cached(ttl: 60)',
      '{ page { owner { name } } }',
      'page',
    ],
    [
      'an object type an interface inside its value may return',
      'nested: Wrapper @cached(ttl: 60)',
      '{ nested { item { name } } }',
      'nested',
    ],
  ])('PRIVATE by %s: cached per viewer', async (_why, field, query, name) => {
    const { schema, calls } = viewerSchema(field);
    const cache = createCache();
    cachedDirectiveTransformer(schema, { cache, sessionId: session });
    const names = await asEach(schema, query, cache);
    expect(names[0]).toContain('alice');
    expect(names[1]).toContain('bob'); // not alice's value
    expect(names[2]).toEqual(names[0]);
    expect(calls[name]).toBe(2); // alice's second read was a hit
  });

  it('without the sessionId option: a build error naming where PRIVATE comes from, the schema untouched', () => {
    const { schema } = viewerSchema('me: User @cached(ttl: 60)');
    const before = schema.getQueryType()!.getFields().me!.resolve;
    expect(() => cachedDirectiveTransformer(schema, { cache: createCache() })).toThrow(
      /@cached on Query\.me is PRIVATE: @cacheControl\(scope: PRIVATE\) on type User .*sessionId.*@cached\(scope: PUBLIC\)/,
    );
    expect(schema.getQueryType()!.getFields().me!.resolve).toBe(before);
    const { schema: abstract } = viewerSchema('item: Item @cached(ttl: 60)');
    expect(() => cachedDirectiveTransformer(abstract, { cache: createCache() })).toThrow(
      /type Secret \(which Item may return\)/,
    );
    // One level down: an interface inside the value (read by the default resolver).
    const { schema: nested } = viewerSchema('nested: Wrapper @cached(ttl: 60)');
    expect(() => cachedDirectiveTransformer(nested, { cache: createCache() })).toThrow(
      /@cached on Query\.nested is PRIVATE: @cacheControl\(scope: PRIVATE\) on type Secret \(which Item may return\)/,
    );
  });

  it.each([
    ['@cached(scope: PRIVATE)', '@cached(ttl: 60, scope: PRIVATE)', undefined],
    [
      '@cacheControl(scope: PRIVATE) with a resolver of its own',
      '@cacheControl(scope: PRIVATE)',
      (u: { email: string }) => u.email,
    ],
    ['@cacheControl(scope: PRIVATE) and @cached', '@cacheControl(scope: PRIVATE) @cached(ttl: 60)', undefined],
  ])(
    'a field of its type marked PRIVATE by %s, resolver or not, may read the cached value: PRIVATE, never one viewer’s for another',
    async (why, hint, resolve) => {
      const counter = callCounter();
      const typeDefs = `${CACHE_CONTROL}
        type Query { me: User @cached(ttl: 60) }
        type User { id: ID, email: String ${hint} }`;
      const resolvers = {
        Query: {
          me: (_p: unknown, _a: unknown, ctx: { user: string }) => (
            counter.count('me'),
            { id: ctx.user, email: `${ctx.user}@secret` }
          ),
        },
        ...(resolve === undefined ? {} : { User: { email: resolve } }),
      };
      const schema = makeSchema(typeDefs, resolvers);
      const cache = createCache();
      cachedDirectiveTransformer(schema, { cache, sessionId: session });
      const names = await asEach(schema, '{ me { id email } }', cache);
      expect(names).toEqual([
        '{"me":{"id":"alice","email":"alice@secret"}}',
        '{"me":{"id":"bob","email":"bob@secret"}}',
        '{"me":{"id":"alice","email":"alice@secret"}}',
      ]);
      expect(counter.calls.me).toBe(2);
      // Without sessionId: the build error names the directive that said PRIVATE.
      const said = why.startsWith('@cached') ? '@cached\\(scope: PRIVATE\\)' : '@cacheControl\\(scope: PRIVATE\\)';
      expect(() => cachedDirectiveTransformer(makeSchema(typeDefs, resolvers), { cache })).toThrow(
        new RegExp(`@cached on Query\\.me is PRIVATE: ${said} on field User\\.email`),
      );
    },
  );

  it("the field's own @cacheControl(scope: PUBLIC) keeps it shared, as Apollo's rule does", async () => {
    const { schema, calls } = viewerSchema('me: User @cached(ttl: 60) @cacheControl(scope: PUBLIC)');
    cachedDirectiveTransformer(schema, { cache: createCache() });
    await asEach(schema, '{ me { name } }');
    expect(calls.me).toBe(1);
  });

  it('@cached(scope: PUBLIC) given: the author says it is the same for every viewer, shared', async () => {
    const { schema, calls } = viewerSchema('me: User @cached(ttl: 60, scope: PUBLIC)');
    cachedDirectiveTransformer(schema, { cache: createCache() }); // no sessionId needed
    const names = await asEach(schema, '{ me { name } }');
    expect(new Set(names).size).toBe(1);
    expect(calls.me).toBe(1);
  });

  it('a Federation entity type hinted PRIVATE with @cached on it needs the sessionId option', () => {
    const schema = buildSubgraphSchema({
      typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        ${CACHE_CONTROL}
        ${cachedDirectiveTypeDefs}
        type Account @key(fields: "id") @cached(ttl: 60) @cacheControl(scope: PRIVATE) { id: ID!, email: String }
        type Query { account(id: ID!): Account }`),
      resolvers: { Account: { __resolveReference: (ref: { id: string }) => ({ id: ref.id }) } } as never,
    });
    expect(() => cachedDirectiveTransformer(schema, { cache: createCache() })).toThrow(
      /@cached on the type Account is PRIVATE: @cacheControl\(scope: PRIVATE\) on type Account/,
    );
    expect(() => cachedDirectiveTransformer(schema, { cache: createCache(), sessionId: session })).not.toThrow();
    // An entity whose value holds an interface that may return a PRIVATE type.
    const holding = buildSubgraphSchema({
      typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        ${CACHE_CONTROL}
        ${cachedDirectiveTypeDefs}
        interface Node { id: ID! }
        type Secret implements Node @cacheControl(scope: PRIVATE) { id: ID!, owner: String }
        type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, item: Node }
        type Query { product(id: ID!): Product }`),
      resolvers: { Product: { __resolveReference: (ref: { id: string }) => ({ id: ref.id }) } } as never,
    });
    expect(() => cachedDirectiveTransformer(holding, { cache: createCache() })).toThrow(
      /@cached on the type Product is PRIVATE: @cacheControl\(scope: PRIVATE\) on type Secret \(which Node may return\)/,
    );
    // Federation 1 declares entities with `extend type`: @cached and @cacheControl are read there too.
    const fed1 = buildSubgraphSchema({
      typeDefs: parse(`${CACHE_CONTROL}
        ${cachedDirectiveTypeDefs}
        extend type Account @key(fields: "id") @cached(ttl: 60) @cacheControl(scope: PRIVATE) { id: ID! @external, email: String }
        type Query { me: Int }`),
      resolvers: { Account: { __resolveReference: (ref: { id: string }) => ({ id: ref.id }) } } as never,
    });
    expect(() => cachedDirectiveTransformer(fed1, { cache: createCache() })).toThrow(
      /@cached on the type Account is PRIVATE/,
    );
  });
});

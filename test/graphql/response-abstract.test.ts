/**
 * The response layer over interfaces and unions, without `__typename`: the entities under a
 * field selected on an implementation are still tagged (a mutation of one invalidates the stored
 * response), an object whose type cannot be told is reported untagged (served, not stored), and the
 * static policy reads an implementation's own field hints and its type's `inheritMaxAge`, as Apollo
 * does at run time, so Yoga (which has no run-time policy) agrees.
 */
import { buildSchema, execute, parse } from 'graphql';
import { cachedDirectiveTypeDefs } from '../../src/graphql';
import { operationPolicy } from '../../src/graphql/response-policy';
import { resultFacts } from '../../src/graphql/response-result';

const schema = buildSchema(`
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  ${cachedDirectiveTypeDefs}
  interface Node { id: ID! }
  type User implements Node { id: ID!, posts: [Post!]! }
  type Post implements Node { id: ID!, title: String! }
  union Search = User | Post
  type Foo { id: ID! }
  type Bar { id: ID! }
  type A { id: ID!, x: Foo }
  type B { id: ID!, x: Bar }
  union AB = A | B
  type C { id: ID!, y: Post }
  union AC = A | C
  interface Actor { id: ID! }
  type Human implements Actor { id: ID! }
  type Bot implements Actor { id: ID! }
  interface Content { id: ID!, author: Actor }
  type Article implements Content { id: ID!, author: Human }
  type Memo implements Content { id: ID!, author: Actor }
  interface Priced { id: ID!, price: Int }
  type Live implements Priced { id: ID!, price: Int @cacheControl(maxAge: 0) }
  type Shelf implements Priced { id: ID!, price: Int }
  type Slow implements Priced { id: ID!, price: Int @cached(ttl: 7) }
  interface Owned { owner: Node @cacheControl(maxAge: 30) }
  type Secret implements Node @cacheControl(maxAge: 5) { id: ID! }
  type Doc implements Owned { owner: Secret }
  type Note implements Owned { owner: Node @cacheControl(maxAge: 30) }
  type Wrapper @cacheControl(inheritMaxAge: true) { v: Int }
  type Outer @cacheControl(maxAge: 60) { w: Wrapper }
  type Query {
    search: [Search!]! @cacheControl(maxAge: 60)
    node(id: ID!): Node @cacheControl(maxAge: 60)
    ab: [AB!]! @cacheControl(maxAge: 60)
    ac: [AC!]! @cacheControl(maxAge: 60)
    content: Content @cacheControl(maxAge: 60)
    post: Post @cacheControl(maxAge: 60)
    priced: Priced @cacheControl(maxAge: 60)
    owned: Owned @cacheControl(maxAge: 60)
    outer: Outer
  }
`);

const post = { __typename: 'Post', id: 'p1', title: 'old' };
const user = { __typename: 'User', id: 'u1', posts: [post] };
const rootValue = {
  search: [user],
  node: () => user,
  post: () => post,
  ab: [
    { __typename: 'A', id: 'a1', x: { id: 'f1' } },
    { __typename: 'B', id: 'b1', x: { id: 'b9' } },
  ],
  ac: [{ __typename: 'C', id: 'c1', y: { __typename: 'Post', id: 'p7', title: 't' } }],
  content: { __typename: 'Article', id: 'a1', author: { __typename: 'Human', id: 'h1' } },
};

async function facts(query: string) {
  const document = parse(query);
  const result = await execute({ schema, document, rootValue });
  expect(result.errors).toBeUndefined();
  return resultFacts(schema, document, undefined, result.data)!;
}

describe('entities under an interface or union, without __typename', () => {
  it.each([
    ['a union member selected in a fragment', '{ search { ... on User { id posts { id title } } } }'],
    [
      'an interface implementation selected in a fragment',
      '{ node(id: "u1") { id ... on User { posts { id title } } } }',
    ],
    ['a named fragment on the implementation', '{ node(id: "u1") { ...U } } fragment U on User { id posts { id } }'],
  ])('%s: the nested entity is tagged', async (_name, query) => {
    const found = await facts(query);
    expect(found.tags).toContain('Post:p1');
    expect(found.tags).toContain('User:u1');
    expect(found.untagged).toBe(false);
  });

  it('a field the possible types return as different types: untagged without __typename, tagged with it', async () => {
    const without = await facts('{ ab { ... on A { id x { id } } ... on B { id x { id } } } }');
    expect(without.untagged).toBe(true);
    const typed = await facts('{ ab { ... on A { id x { __typename id } } ... on B { id x { __typename id } } } }');
    expect(typed.untagged).toBe(false);
    expect(typed.tags).toEqual(expect.arrayContaining(['A:a1', 'B:b1', 'Foo:f1', 'Bar:b9']));
  });
});

describe('an entity whose id is not selected', () => {
  it.each([
    ['an object type', '{ post { title } }'],
    ['under a fragment', '{ search { ... on User { id posts { title } } } }'],
    ['an interface, no __typename', '{ node(id: "u1") { ... on User { posts { id } } } }'],
  ])('%s: untagged (an invalidation of it could not reach the stored copy)', async (_name, query) => {
    expect((await facts(query)).untagged).toBe(true);
  });

  it('selected: tagged', async () => {
    expect((await facts('{ post { id title } }')).untagged).toBe(false);
  });
});

describe('aliases and narrower types', () => {
  it('one response key aliasing a different field under each member: untagged without __typename, tagged by the member with it', async () => {
    const without = await facts('{ ac { ... on A { v: x { id } } ... on C { v: y { id } } } }');
    expect(without.untagged).toBe(true);
    const typed = await facts('{ ac { __typename ... on A { v: x { id } } ... on C { id v: y { id } } } }');
    expect(typed.untagged).toBe(false);
    expect(typed.tags).toEqual(expect.arrayContaining(['C:c1', 'Post:p7']));
  });

  it("an implementation narrowing the interface's field type: tagged as each type the interface's may be", async () => {
    const found = await facts('{ content { id author { id } } }');
    expect(found.untagged).toBe(false);
    expect(found.tags).toEqual(expect.arrayContaining(['Human:h1', 'Bot:h1']));
  });
});

describe('static policy through an interface', () => {
  const policy = (query: string) => operationPolicy(schema, parse(query), undefined, 0);

  it("an implementation's maxAge 0 makes a field selected through the interface uncacheable", () => {
    expect(policy('{ priced { id price } }')).toBe('no_cache_hint');
    expect(policy('{ priced { id } }')).toMatchObject({ maxAge: 60 });
  });

  it("an implementation's @cached(ttl:) caps it; selected on another implementation only, it does not", () => {
    const schemaWithout = buildSchema(
      `${cachedDirectiveTypeDefs}
      directive @cacheControl(maxAge: Int, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
      interface Priced { id: ID!, price: Int }
      type Shelf implements Priced { id: ID!, price: Int }
      type Slow implements Priced { id: ID!, price: Int @cached(ttl: 7) }
      type Query { priced: Priced @cacheControl(maxAge: 60) }`,
    );
    expect(operationPolicy(schemaWithout, parse('{ priced { id price } }'), undefined, 0)).toMatchObject({ maxAge: 7 });
    expect(policy('{ priced { ... on Shelf { price } } }')).toMatchObject({ maxAge: 60 });
  });

  it("a narrower type an implementation's field returns: its type hint counts", () => {
    expect(policy('{ owned { owner { id } } }')).toMatchObject({ maxAge: 5 });
  });

  it("a type's own inheritMaxAge: its fields take the parent's maxAge, not defaultMaxAge", () => {
    expect(policy('{ outer { w { v } } }')).toMatchObject({ maxAge: 60 });
  });
});

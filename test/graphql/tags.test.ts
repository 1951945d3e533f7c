/** @cached(tags:): templates checked at build, filled per call, a placeholder without value bypasses. */
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, cacheReport, herdcacheContext } from '../../src/graphql';
import {
  type TemplateSite,
  MAX_TAGS_PER_TEMPLATE,
  UnfilledTag,
  fillTags,
  parseTagTemplate,
} from '../../src/graphql/tags';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { callCounter, makeSchema, run } from './fixtures';

const typeDefs = `
  input Range { from: Int, to: Int }
  input Filter { authorId: ID, tags: [String!], range: Range, raw: JSON }
  scalar JSON
  type Query {
    user(id: ID!): User @cached(ttl: 60, tags: ["User:{args.id}"])
    users(ids: [ID!]!): [User!]! @cached(ttl: 60, tags: ["User:{args.ids}", "Users"])
    search(filter: Filter!): [String!]! @cached(ttl: 60, tags: ["Author:{args.filter.authorId}", "From:{args.filter.range.from}"])
    top: [String!]! @cached(ttl: 60, tags: ["Top"])
    posts: [Post!]!
  }
  type User { id: ID!, name: String! }
  type Post {
    id: ID!
    authorId: ID
    author: User @cached(ttl: 60, tags: ["User:{authorId}", "Post:{parent.id}"])
  }
`;

function setup(store: Store = memoryStore()) {
  const counter = callCounter();
  const names: Record<string, string> = { u1: 'Ann', u2: 'Bob' };
  const cache = createCache({ store });
  const bypasses: string[] = [];
  const schema = makeSchema(typeDefs, {
    Query: {
      user: (_p, { id }) => {
        counter.count(`user:${id}`);
        return { id, name: names[id] };
      },
      users: (_p, { ids }) => {
        counter.count('users');
        return ids.map((id: string) => ({ id, name: names[id] }));
      },
      search: (_p, { filter }) => {
        counter.count('search');
        return [JSON.stringify(filter)];
      },
      top: () => {
        counter.count('top');
        return Object.values(names);
      },
      posts: () => [
        { id: 'p1', authorId: 'u1' },
        { id: 'p2', authorId: null },
      ],
    },
    Post: {
      author: (post) => {
        counter.count(`author:${post.id}`);
        return post.authorId === null ? null : { id: post.authorId, name: names[post.authorId] };
      },
    },
  });
  cachedDirectiveTransformer(schema, {
    cache,
    onBypass: (coordinate, reason) => bypasses.push(`${coordinate} ${reason}`),
  });
  return { cache, schema, counter, names, bypasses };
}

describe('@cached(tags:)', () => {
  it('tags each call from its arguments: invalidating one tag drops exactly the values carrying it', async () => {
    const { cache, schema, counter, names } = setup();
    const both = '{ a: user(id: "u1") { name } b: user(id: "u2") { name } }';
    expect((await run(schema, both)).data).toEqual({ a: { name: 'Ann' }, b: { name: 'Bob' } });
    names.u1 = 'Ann 2';
    names.u2 = 'Bob 2';
    await cache.invalidateTags(['User:u1']);
    expect((await run(schema, both)).data).toEqual({ a: { name: 'Ann 2' }, b: { name: 'Bob' } });
    expect(counter.calls).toEqual({ 'user:u1': 2, 'user:u2': 1 });
  });

  it('a list argument gives one tag per item; static tags are carried as written', async () => {
    const { cache, schema, counter, names } = setup();
    const query = '{ users(ids: ["u1", "u2"]) { name } top }';
    await run(schema, query);
    names.u2 = 'Bob 2';
    await cache.invalidateTags(['User:u3']); // no value carries it
    expect((await run(schema, query)).data).toEqual({ users: [{ name: 'Ann' }, { name: 'Bob' }], top: ['Ann', 'Bob'] });
    await cache.invalidateTags(['User:u2']);
    expect((await run(schema, query)).data).toEqual({
      users: [{ name: 'Ann' }, { name: 'Bob 2' }],
      top: ['Ann', 'Bob'],
    });
    await cache.invalidateTags(['Top']);
    expect((await run(schema, query)).data!.top).toEqual(['Ann', 'Bob 2']);
    expect(counter.calls).toEqual({ users: 2, top: 2 });
  });

  it('dotted paths into input objects', async () => {
    const { cache, schema, counter } = setup();
    const query = '{ search(filter: { authorId: "u1", range: { from: 3 } }) }';
    await run(schema, query);
    await run(schema, query);
    expect(counter.calls.search).toBe(1);
    await cache.invalidateTags(['From:3']);
    await run(schema, query);
    await cache.invalidateTags(['Author:u1']);
    await run(schema, query);
    expect(counter.calls.search).toBe(3);
  });

  it('parent placeholders: {authorId} and {parent.id}; a parent without the value is bypassed and counted, never tagged wrongly', async () => {
    const { cache, schema, counter, names, bypasses } = setup();
    const query = '{ posts { id author { name } } }';
    const context = herdcacheContext({ cache });
    expect((await run(schema, query, context)).data).toEqual({
      posts: [
        { id: 'p1', author: { name: 'Ann' } },
        { id: 'p2', author: null },
      ],
    });
    expect(cacheReport(context)!.sources['Post.author']).toMatchObject({ misses: 1, fills: 1, bypassed: 1 });
    expect(bypasses).toEqual(['Post.author no_tag_value']);
    await run(schema, query);
    expect(counter.calls).toEqual({ 'author:p1': 1, 'author:p2': 2 });
    names.u1 = 'Ann 2';
    await cache.invalidateTags(['User:u1']);
    expect((await run(schema, query)).data).toEqual({
      posts: [
        { id: 'p1', author: { name: 'Ann 2' } },
        { id: 'p2', author: null },
      ],
    });
    await cache.invalidateTags(['Post:p1']);
    await run(schema, query);
    expect(counter.calls['author:p1']).toBe(3);
  });

  it('needs a store that can invalidate tags', () => {
    const store: Store = {
      name: 'plain',
      getMany: async (keys) => keys.map(() => undefined),
      setMany: async () => {},
      delete: async () => {},
      clear: async () => {},
    };
    const cache = createCache({ store });
    expect(() =>
      cachedDirectiveTransformer(makeSchema('type Query { a: Int @cached(ttl: 5, tags: ["A"]) }'), { cache }),
    ).toThrow(/herdcache: @cached\(tags:\) on Query\.a needs a store with invalidateTags/);
    expect(() =>
      cachedDirectiveTransformer(makeSchema('type Query { a: Int @cached(ttl: 5) }'), { cache }),
    ).not.toThrow();
  });
});

describe('tag templates: build errors name the field', () => {
  const cache = createCache();
  const build = (defs: string) => () =>
    cachedDirectiveTransformer(makeSchema(`input F { id: ID, inner: F, ids: [ID!], list: [F!] } ${defs}`), { cache });
  const query = (directive: string) =>
    build(
      `type Query { a(id: ID, f: F): A ${directive} } type A { id: ID, b(x: Int): Int @cached(ttl: 5, tags: ["B"]) }`,
    );

  it.each([
    ['"User:{id"', /@cached\(tags:\) on Query\.a: "User:\{id" has a "\{" without its "\}"/],
    ['"User:id}"', /"User:id\}" has a "\}" without its "\{"/],
    ['"User:{{args.id}}"', /without its "\}"/],
    ['"User:{}"', /\{\} in "User:\{\}" is not a placeholder/],
    ['"User:{ args.id }"', /\{ args\.id \} in .* is not a placeholder/],
    ['"User:{args..id}"', /is not a placeholder/],
    ['"User:{args-id}"', /is not a placeholder/],
    ['"User:{args}"', /\{args\} in "User:\{args\}" names no argument/],
    ['"User:{args.uid}"', /\{args\.uid\} .* names no argument of the field \(arguments: id, f\)/],
    ['"User:{args.f}"', /\{args\.f\} .* is the input object F: name one of its fields/],
    ['"User:{args.f.nope}"', /the input object F has no field "nope"/],
    ['"User:{args.id.x}"', /\{args\.id\} is ID, it has no field "x"/],
    ['"User:{args.f.list}"', /is \[F!\]: a placeholder needs a scalar, an enum or a list of them/],
    ['"User:{args.f.ids.x}"', /\{args\.f\.ids\} is \[ID!\], it has no field "x"/],
    ['"User:{result.id}"', /\{result\.id\} .* cannot depend on the value/],
    ['"User:{id}"', /Query\.a is a root field, it has no parent; use \{args\.name\}/],
    ['"User:{parent.id}"', /Query\.a is a root field/],
    ['"User:{parent}"', /names no property of the parent/],
    ['["A", 3]', /@cached\(tags:\) on Query\.a: each tag must be a string, got 3/],
    ['[""]', /each tag must be a non-empty string, got ""/],
  ])('refuses @cached(tags: %s)', (tags, message) => {
    expect(query(`@cached(ttl: 5, tags: ${tags})`)).toThrow(message);
  });

  it('accepts dotted paths, list arguments, one string for a list, null, and parent paths on non-root fields', () => {
    expect(
      query('@cached(ttl: 5, tags: ["F:{args.f.inner.inner.id}", "I:{args.f.ids}:{args.id}", "static"])'),
    ).not.toThrow();
    expect(query('@cached(ttl: 5, tags: "User:{args.id}")')).not.toThrow();
    expect(query('@cached(ttl: 5, tags: null)')).not.toThrow();
    expect(
      build('type Query { a: A } type A { id: ID, b: Int @cached(ttl: 5, tags: ["A:{id}", "B:{parent.owner.id}"]) }'),
    ).not.toThrow();
  });

  it('a failed build changes nothing', () => {
    const schema = makeSchema(
      'type Query { a: Int @cached(ttl: 5, tags: ["A"]) b(id: ID): Int @cached(ttl: 5, tags: ["B:{args.nope}"]) }',
    );
    const before = schema.getQueryType()!.getFields().a!.resolve;
    expect(() => cachedDirectiveTransformer(schema, { cache })).toThrow(/Query\.b/);
    expect(schema.getQueryType()!.getFields().a!.resolve).toBe(before);
  });
});

describe('fillTags', () => {
  const schema = makeSchema(
    'type Query { a(id: ID, ids: [ID], n: Int, on: Boolean, raw: JSON): A } type A { id: ID } scalar JSON',
  );
  const site: TemplateSite = {
    directive: 'cached',
    coordinate: 'A.id',
    field: (schema.getType('A') as any).getFields().id,
    isRoot: false,
  };
  const rootSite: TemplateSite = {
    directive: 'cached',
    coordinate: 'Query.a',
    field: schema.getQueryType()!.getFields().a!,
    isRoot: true,
  };
  const fill = (templates: string[], values: { args?: unknown; parent?: unknown }, where = rootSite) =>
    fillTags(
      templates.map((t) => parseTagTemplate(t, where)),
      { args: values.args ?? {}, parent: values.parent },
    );

  it('scalars: strings, finite numbers, bigints, booleans; lists expand; duplicates are dropped', () => {
    expect(
      fill(['U:{args.id}', 'N:{args.n}', 'B:{args.on}', 'U:{args.id}'], { args: { id: 'x', n: 7, on: false } }),
    ).toEqual(['U:x', 'N:7', 'B:false']);
    expect(fill(['U:{args.ids}'], { args: { ids: ['1', 2n, 3] } })).toEqual(['U:1', 'U:2', 'U:3']);
    expect(fill(['{args.ids}-{args.ids}'], { args: { ids: ['a', 'b'] } })).toEqual(['a-a', 'a-b', 'b-a', 'b-b']);
    expect(fill(['U:{args.ids}'], { args: { ids: [] } })).toEqual([]);
    expect(fill(['R:{args.raw.deep.id}'], { args: { raw: { deep: { id: 'd' } } } })).toEqual(['R:d']);
    expect(fill(['P:{id}:{parent.owner.id}'], { parent: { id: 1, owner: { id: 'o' } } }, site)).toEqual(['P:1:o']);
  });

  it.each([
    ['null', 'U:{args.id}', { id: null }, 'got null'],
    ['undefined', 'U:{args.id}', {}, 'got undefined'],
    ['an empty string', 'U:{args.id}', { id: '' }, 'got ""'],
    ['NaN', 'N:{args.n}', { n: NaN }, 'got NaN'],
    ['an object', 'R:{args.raw}', { raw: { a: 1 } }, 'got an object'],
    ['a path through a list', 'R:{args.raw.a}', { raw: [{ a: 1 }] }, 'got undefined'],
    ['a list with a null', 'I:{args.ids}', { ids: ['1', null] }, 'got a list of 2 that is not all scalars'],
  ])('a placeholder whose value is %s leaves the template unfilled', (_what, template, args, got) => {
    const filled = fill(['Static', template], { args });
    expect(filled).toBeInstanceOf(UnfilledTag);
    expect((filled as UnfilledTag).reason).toBe(
      `${template.slice(template.indexOf('{'))} in "${template}" has no tag value (${got})`,
    );
  });

  it(`more than ${MAX_TAGS_PER_TEMPLATE} tags from one template leaves it unfilled`, () => {
    const ids = Array.from({ length: 40 }, (_, i) => String(i));
    expect(fill(['{args.ids}:{args.ids}'], { args: { ids } })).toBeInstanceOf(UnfilledTag);
    expect((fill(['{args.ids}'], { args: { ids } }) as string[]).length).toBe(40);
  });
});

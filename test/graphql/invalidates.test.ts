/**
 * @invalidates(tags:) on mutations, through real graphql-js execution (and Apollo's
 * executeOperation): invalidation after success only, before the result is returned, never failing
 * the mutation; racing fills are not written; build errors name the field.
 */
import { ApolloServer } from '@apollo/server';
import { GraphQLError, buildSchema } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, herdcacheContext } from '../../src/graphql';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { single } from '../apollo/fixtures';
import { type Deferred, deferred, flush } from '../helpers';
import { callCounter, makeSchema, run } from './fixtures';

const typeDefs = `
  input PostEdit { id: ID!, title: String! }
  type Query {
    user(id: ID!): User @cached(ttl: 60, tags: ["User:{args.id}"])
    post(id: ID!): Post @cached(ttl: 60, tags: ["Post:{args.id}"])
  }
  type User {
    id: ID!
    name: String!
    "Keyed by the parent's id, tagged from it."
    profile: String! @cached(ttl: 60, tags: ["User:{id}"])
    postTitles: [String!]! @cached(ttl: 60, tags: ["UserPosts:{id}"])
  }
  type Post { id: ID!, title: String!, authorId: ID! }
  type Mutation {
    renameUser(id: ID!, name: String!): User @invalidates(tags: ["User:{args.id}"])
    editPost(edit: PostEdit!): Post @invalidates(tags: ["Post:{args.edit.id}", "UserPosts:{result.authorId}"])
    deletePosts(ids: [ID!]!): [ID!]! @invalidates(tags: ["Post:{result}"])
    failRename(id: ID!, name: String!, how: String!): User @invalidates(tags: ["User:{args.id}"])
    maybeUser(id: ID!): User @invalidates(tags: ["User:{result.id}", "Audit:{args.id}"])
  }
`;

interface Row {
  id: string;
  name: string;
}

function setup(options: { store?: Store; onInvalidationError?: (coordinate: string, error: Error) => void } = {}) {
  const counter = callCounter();
  const users = new Map<string, Row>([
    ['u1', { id: 'u1', name: 'Ann' }],
    ['u2', { id: 'u2', name: 'Bob' }],
  ]);
  const posts = new Map([
    ['p1', { id: 'p1', title: 'First', authorId: 'u1' }],
    ['p2', { id: 'p2', title: 'Second', authorId: 'u2' }],
  ]);
  /** When set, the next `user` resolver call reads the row and then waits on it: a fill in flight. */
  let userGate: Deferred<void> | undefined;
  /** When set, the next renameUser waits on it before it writes. */
  let renameGate: Deferred<void> | undefined;
  const cache = createCache({ store: options.store ?? memoryStore() });
  const schema = makeSchema(typeDefs, {
    Query: {
      user: async (_p, { id }) => {
        counter.count(`user:${id}`);
        const row = users.get(id);
        const snapshot = row && { ...row }; // read now, as a database query would
        const gate = userGate;
        userGate = undefined;
        if (gate !== undefined) await gate.promise;
        return snapshot;
      },
      post: (_p, { id }) => {
        counter.count(`post:${id}`);
        return { ...posts.get(id) };
      },
    },
    User: {
      profile: (user: Row) => {
        counter.count(`profile:${user.id}`);
        return `${users.get(user.id)!.name} (profile)`;
      },
      postTitles: (user: Row) => {
        counter.count(`postTitles:${user.id}`);
        return [...posts.values()].filter((post) => post.authorId === user.id).map((post) => post.title);
      },
    },
    Mutation: {
      renameUser: async (_p, { id, name }) => {
        counter.count('renameUser');
        const gate = renameGate;
        renameGate = undefined;
        if (gate !== undefined) await gate.promise;
        const row = users.get(id)!;
        row.name = name;
        return { ...row };
      },
      editPost: async (_p, { edit }) => {
        counter.count('editPost');
        const post = posts.get(edit.id)!;
        post.title = edit.title;
        return { ...post };
      },
      deletePosts: (_p, { ids }) => {
        counter.count('deletePosts');
        for (const id of ids) posts.delete(id);
        return ids;
      },
      failRename: async (_p, { id, name, how }) => {
        counter.count('failRename');
        // The write lands, then the resolver fails: herdcache cannot know what was written.
        users.get(id)!.name = name;
        if (how === 'throw') throw new GraphQLError('rename failed', { extensions: { code: 'CONFLICT' } });
        if (how === 'reject') return Promise.reject(new Error('rename rejected'));
        return new Error('rename returned an error');
      },
      maybeUser: (_p, { id }) => {
        counter.count('maybeUser');
        return users.get(id) ?? null;
      },
    },
  });
  cachedDirectiveTransformer(schema, { cache, onInvalidationError: options.onInvalidationError });
  return {
    cache,
    schema,
    counter,
    users,
    posts,
    /** The next `user` fill reads the row, then waits for the returned gate. */
    holdNextUserFill() {
      userGate = deferred<void>();
      return userGate;
    },
    /** The next renameUser waits for the returned gate before it writes. */
    holdNextRename() {
      renameGate = deferred<void>();
      return renameGate;
    },
  };
}

describe('@invalidates', () => {
  it('query cached → mutation → the next query sees the new value (and only the tagged values were dropped)', async () => {
    const { schema, counter } = setup();
    const query = '{ a: user(id: "u1") { name } b: user(id: "u2") { name } }';
    expect((await run(schema, query)).data).toEqual({ a: { name: 'Ann' }, b: { name: 'Bob' } });
    expect((await run(schema, query)).data).toEqual({ a: { name: 'Ann' }, b: { name: 'Bob' } });
    expect(counter.calls).toEqual({ 'user:u1': 1, 'user:u2': 1 });

    const mutation = await run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { id name } }');
    expect(mutation).toEqual({ data: { renameUser: { id: 'u1', name: 'Anna' } } });

    expect((await run(schema, query)).data).toEqual({ a: { name: 'Anna' }, b: { name: 'Bob' } });
    expect(counter.calls).toEqual({ 'user:u1': 2, 'user:u2': 1, renameUser: 1 });
  });

  it("invalidates before the result is returned: the mutation's own selection set reads fresh values", async () => {
    const { schema, counter } = setup();
    expect((await run(schema, '{ user(id: "u1") { profile } }')).data).toEqual({ user: { profile: 'Ann (profile)' } });
    // User.profile of u1 is cached under the parent's identity and tagged User:u1 from {id}.
    const result = await run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { profile } }');
    expect(result).toEqual({ data: { renameUser: { profile: 'Anna (profile)' } } });
    expect(counter.calls['profile:u1']).toBe(2);
  });

  it('invalidates after the write, not before: a read while the mutation runs cannot refill the old value for later', async () => {
    const { schema, counter, holdNextRename } = setup();
    const query = '{ user(id: "u1") { name } }';
    await run(schema, query);
    const gate = holdNextRename();
    const mutation = run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { name } }');
    await flush();
    expect(counter.calls.renameUser).toBe(1);
    // Before the write: the cached value is still there (invalidating first would make this a
    // miss that refills "Ann" from the database and caches it past the mutation).
    expect((await run(schema, query)).data).toEqual({ user: { name: 'Ann' } });
    gate.resolve();
    expect((await mutation).data).toEqual({ renameUser: { name: 'Anna' } });
    expect((await run(schema, query)).data).toEqual({ user: { name: 'Anna' } });
    expect(counter.calls['user:u1']).toBe(2);
  });

  it("waits for the store's invalidation before returning the result", async () => {
    const inner = memoryStore();
    const gate = deferred<void>();
    const store: Store = Object.assign(Object.create(inner) as Store, {
      async invalidateTags(tags: readonly string[]) {
        await gate.promise;
        return inner.invalidateTags(tags);
      },
    });
    const { schema } = setup({ store });
    let done = false;
    const pending = run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { name } }').then((result) => {
      done = true;
      return result;
    });
    await flush(10);
    expect(done).toBe(false);
    gate.resolve();
    expect((await pending).data).toEqual({ renameUser: { name: 'Anna' } });
  });

  it.each(['throw', 'reject', 'return'])('a mutation that fails (%s an error) invalidates nothing', async (how) => {
    const { cache, schema, counter } = setup();
    const spy = jest.spyOn(cache, 'invalidateTags');
    await run(schema, '{ user(id: "u1") { name } }');
    const result = await run(schema, `mutation { failRename(id: "u1", name: "Anna", how: "${how}") { name } }`);
    expect(result.data).toEqual({ failRename: null });
    expect(result.errors).toHaveLength(1);
    expect(counter.calls.failRename).toBe(1);
    expect(spy).not.toHaveBeenCalled();
    // The cached value is untouched (the write landed, but nothing said it did).
    expect((await run(schema, '{ user(id: "u1") { name } }')).data).toEqual({ user: { name: 'Ann' } });
    expect(counter.calls['user:u1']).toBe(1);
  });

  it('templates over nested arguments and the result: {args.edit.id}, {result.authorId}', async () => {
    const { schema, counter } = setup();
    const query =
      '{ p1: post(id: "p1") { title } p2: post(id: "p2") { title } u1: user(id: "u1") { postTitles } u2: user(id: "u2") { postTitles } }';
    await run(schema, query);
    const result = await run(schema, 'mutation { editPost(edit: { id: "p1", title: "First!" }) { id } }');
    expect(result).toEqual({ data: { editPost: { id: 'p1' } } });
    expect((await run(schema, query)).data).toEqual({
      p1: { title: 'First!' },
      p2: { title: 'Second' },
      u1: { postTitles: ['First!'] },
      u2: { postTitles: ['Second'] },
    });
    // Post:p1 and UserPosts:u1 (from the result's authorId) were dropped; p2 and u2 were not.
    expect(counter.calls).toMatchObject({ 'post:p1': 2, 'post:p2': 1, 'postTitles:u1': 2, 'postTitles:u2': 1 });
  });

  it('{result} of a list of IDs invalidates one tag per item', async () => {
    const { cache, schema } = setup();
    const spy = jest.spyOn(cache, 'invalidateTags');
    const result = await run(schema, 'mutation { deletePosts(ids: ["p1", "p2"]) }');
    expect(result).toEqual({ data: { deletePosts: ['p1', 'p2'] } });
    expect(spy.mock.calls).toEqual([[['Post:p1', 'Post:p2']]]);
  });

  it('a template without a value is reported and skipped; the other templates are still invalidated; the mutation succeeds', async () => {
    const reports: string[] = [];
    const { cache, schema } = setup({
      onInvalidationError: (coordinate, error) => reports.push(`${coordinate}: ${error.message}`),
    });
    const spy = jest.spyOn(cache, 'invalidateTags');
    const result = await run(schema, 'mutation { maybeUser(id: "nobody") { id } }');
    expect(result).toEqual({ data: { maybeUser: null } });
    expect(reports).toEqual([
      'Mutation.maybeUser: herdcache: @invalidates on Mutation.maybeUser: {result.id} in "User:{result.id}" has no tag value (got undefined); its tags were not invalidated',
    ]);
    expect(spy.mock.calls).toEqual([[['Audit:nobody']]]);
  });

  it('a store that fails to invalidate does not fail the mutation: counted as a store error, reported to onStoreError', async () => {
    const inner = memoryStore();
    const store: Store = Object.assign(Object.create(inner) as Store, {
      invalidateTags: () => Promise.reject(new Error('store down')),
    });
    const storeErrors: string[] = [];
    const reports: Error[] = [];
    const { cache, schema } = setup({ store, onInvalidationError: (_c, error) => reports.push(error) });
    cache.observe({
      onStoreError: (error, operation) => storeErrors.push(`${operation}: ${(error as Error).message}`),
    });
    const result = await run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { name } }');
    expect(result).toEqual({ data: { renameUser: { name: 'Anna' } } });
    expect(storeErrors).toEqual(['invalidateTags: store down']);
    expect(cache.metrics().total.storeErrors).toBe(1);
    expect(reports).toEqual([]);
  });

  it('an invalidateTags that rejects (not a store failure) is reported to onInvalidationError; the mutation succeeds', async () => {
    const reports: string[] = [];
    const { cache, schema } = setup({
      onInvalidationError: (coordinate, error) => reports.push(`${coordinate}: ${error.message}`),
    });
    jest.spyOn(cache, 'invalidateTags').mockRejectedValue(new Error('closed'));
    const result = await run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { name } }');
    expect(result).toEqual({ data: { renameUser: { name: 'Anna' } } });
    expect(reports).toEqual(['Mutation.renameUser: closed']);
  });

  it('a mutation racing a fill in flight: the old value is never served once the mutation has returned', async () => {
    const { cache, schema, counter, holdNextUserFill } = setup();
    const query = '{ user(id: "u1") { name } }';
    const gate = holdNextUserFill();
    // A query starts filling user u1: its resolver has read "Ann" and is still running.
    const before = run(schema, query, herdcacheContext({ cache }));
    await flush();
    expect(counter.calls['user:u1']).toBe(1);
    expect(cache.inFlight).toBe(1);

    const mutation = await run(schema, 'mutation { renameUser(id: "u1", name: "Anna") { name } }');
    expect(mutation.data).toEqual({ renameUser: { name: 'Anna' } });

    // After the mutation: a new query sees the new name, and so does the one already waiting
    // (its fill was abandoned; it started over), without waiting for the old fill to end.
    expect((await run(schema, query)).data).toEqual({ user: { name: 'Anna' } });
    expect((await before).data).toEqual({ user: { name: 'Anna' } });
    // The old fill now ends with "Ann": its result is dropped, not written over the new value.
    gate.resolve();
    await flush();
    expect((await run(schema, query)).data).toEqual({ user: { name: 'Anna' } });
    expect(counter.calls['user:u1']).toBe(2);
  });

  it('through Apollo Server (executeOperation, with the plugin): query, mutation, fresh query', async () => {
    const { cache, schema, counter } = setup();
    const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache, extensions: true })] });
    await server.start();
    try {
      const ask = async (query: string) =>
        single(await server.executeOperation({ query }, { contextValue: herdcacheContext({ cache }) }));
      expect((await ask('{ user(id: "u2") { name } }')).data).toEqual({ user: { name: 'Bob' } });
      expect((await ask('{ user(id: "u2") { name } }')).extensions).toMatchObject({ cache: { total: { hits: 1 } } });
      expect((await ask('mutation { renameUser(id: "u2", name: "Rob") { id } }')).data).toEqual({
        renameUser: { id: 'u2' },
      });
      const after = await ask('{ user(id: "u2") { name } }');
      expect(after.data).toEqual({ user: { name: 'Rob' } });
      expect(after.extensions).toMatchObject({ cache: { total: { hits: 0, misses: 1, fills: 1 } } });
      expect(counter.calls['user:u2']).toBe(2);
    } finally {
      await server.stop();
    }
  });
});

describe('@invalidates: schema build errors name the field', () => {
  const cache = createCache();
  const build = (defs: string) => () => cachedDirectiveTransformer(makeSchema(defs), { cache });

  it('refuses it outside the Mutation type', () => {
    expect(build('type Query { a: Int @invalidates(tags: ["A"]) }')).toThrow(
      /@invalidates cannot be used on Query\.a: .*only fields of the Mutation type/,
    );
    expect(build('type Query { u: U } type U { a: Int @invalidates(tags: ["A"]) }')).toThrow(
      /@invalidates cannot be used on U\.a/,
    );
    expect(build('type Query { a: Int } type Subscription { s: Int @invalidates(tags: ["A"]) }')).toThrow(
      /Subscription\.s/,
    );
    expect(build('type Query { n: N } interface N { a: Int @invalidates(tags: ["A"]) }')).toThrow(/N\.a/);
    // Custom root type names are recognized.
    expect(
      build(
        'schema { query: Q, mutation: M } type Q { a: Int } type M { write(id: ID): Int @invalidates(tags: ["A:{args.id}"]) }',
      ),
    ).not.toThrow();
  });

  it.each([
    ['[]', /@invalidates on Mutation\.m needs tags: a non-empty list/],
    ['null', /@invalidates on Mutation\.m needs tags/],
    ['["U:{id}"]', /@invalidates\(tags:\) on Mutation\.m: \{id\} in "U:\{id\}" is not known here/],
    ['["U:{parent.id}"]', /\{parent\.id\} .* is not known here/],
    ['["U:{args.nope}"]', /\{args\.nope\} .* names no argument of the field \(arguments: id, ids\)/],
    ['["U:{result.x"]', /has a "\{" without its "\}"/],
    ['["U:{result..x}"]', /is not a placeholder/],
    ['[7]', /each tag must be a string, got 7/],
  ])('refuses @invalidates(tags: %s)', (tags, message) => {
    expect(
      build(
        `type Query { a: Int } type U { id: ID } type Mutation { m(id: ID, ids: [ID!]): U @invalidates(tags: ${tags}) }`,
      ),
    ).toThrow(message);
  });

  it('checks {result} against the shape of the return type', () => {
    const mutation = (type: string, tag: string) =>
      build(`type Query { a: Int } type U { id: ID } type Mutation { m: ${type} @invalidates(tags: ["${tag}"]) }`);
    expect(mutation('Boolean', 'U:{result.id}')).toThrow(
      /Mutation\.m returns Boolean, which has no "id"; use \{result\} or \{args\.name\}/,
    );
    expect(mutation('U!', 'U:{result}')).toThrow(
      /Mutation\.m returns the object type U!; name one of its properties, e.g. \{result\.id\}/,
    );
    expect(mutation('[U!]!', 'U:{result.id}')).toThrow(/returns the list \[U!\]!; a path into a list is not supported/);
    expect(mutation('[U!]!', 'U:{result}')).toThrow(/returns \[U!\]!, not scalars/);
    expect(mutation('ID!', 'U:{result}')).not.toThrow();
    expect(mutation('[ID!]', 'U:{result}')).not.toThrow();
    expect(mutation('U', 'U:{result.id}:{result.owner.id}')).not.toThrow();
  });

  it('refuses an unknown argument, a store without tags, and a schema already transformed', () => {
    // An app declaring its own @invalidates with more arguments than herdcache knows.
    const own = buildSchema(
      'directive @invalidates(tags: [String!]!, keys: [String!]) on FIELD_DEFINITION type Query { a: Int } type Mutation { m: Int @invalidates(tags: ["A"], keys: ["k"]) }',
    );
    expect(() => cachedDirectiveTransformer(own, { cache })).toThrow(
      /@invalidates on Mutation\.m has an unknown argument "keys" \(known: tags\)/,
    );
    const defs = 'type Query { a: Int } type Mutation { m: Int @invalidates(tags: ["A"]) }';
    const plain: Store = {
      name: 'plain',
      getMany: async (keys) => keys.map(() => undefined),
      setMany: async () => {},
      delete: async () => {},
      clear: async () => {},
    };
    expect(() => cachedDirectiveTransformer(makeSchema(defs), { cache: createCache({ store: plain }) })).toThrow(
      /@invalidates on Mutation\.m.*needs a store with invalidateTags/,
    );
    const schema = makeSchema(defs);
    cachedDirectiveTransformer(schema, { cache });
    expect(() => cachedDirectiveTransformer(schema, { cache })).toThrow(/Mutation\.m is already wrapped/);
  });

  it('a failed build changes nothing', () => {
    const schema = makeSchema(
      'type Query { a: Int @cached(ttl: 5) } type Mutation { m: Int @invalidates(tags: ["A"]) n: Int @invalidates(tags: ["{oops}"]) }',
    );
    const before = schema.getMutationType()!.getFields().m!.resolve;
    expect(() => cachedDirectiveTransformer(schema, { cache })).toThrow(/Mutation\.n/);
    expect(schema.getMutationType()!.getFields().m!.resolve).toBe(before);
  });
});

/**
 * A mutation's result read by `{result}` / `{result.id}` may hold promises, as graphql-js allows
 * (a list of promises, a promised field): they are awaited before the tags are filled. Before,
 * the placeholder read the promise itself, nothing was invalidated (onInvalidationError only),
 * and the next reads were stale.
 */
it('{result} and {result.id} read through promises in the mutation’s result', async () => {
  const versions = new Map([
    ['1', 0],
    ['2', 0],
  ]);
  const cache = createCache();
  const errors: string[] = [];
  const schema = makeSchema(
    `
    type Item { id: ID!, version: Int! }
    type Query { item(id: ID!): Item @cached(ttl: 60, tags: ["Item:{args.id}"]) }
    type Mutation {
      bumpAll(ids: [ID!]!): [ID!]! @invalidates(tags: ["Item:{result}"])
      bumpLazy(id: ID!): Item @invalidates(tags: ["Item:{result.id}"])
    }
  `,
    {
      Query: { item: (_p, { id }) => ({ id, version: versions.get(id) }) },
      Mutation: {
        bumpAll: (_p, { ids }: { ids: string[] }) =>
          ids.map(async (id) => {
            versions.set(id, versions.get(id)! + 1);
            return id;
          }),
        bumpLazy: (_p, { id }: { id: string }) => {
          versions.set(id, versions.get(id)! + 1);
          return { id: Promise.resolve(id), version: Promise.resolve(versions.get(id)) };
        },
      },
    },
  );
  cachedDirectiveTransformer(schema, { cache, onInvalidationError: (_c, error) => errors.push(error.message) });
  const read = async (id: string) =>
    ((await run(schema, `{ item(id: "${id}") { version } }`)).data as { item: { version: number } }).item.version;
  expect([await read('1'), await read('2')]).toEqual([0, 0]);
  expect((await run(schema, 'mutation { bumpAll(ids: ["1", "2"]) }')).data).toEqual({ bumpAll: ['1', '2'] });
  expect([await read('1'), await read('2')]).toEqual([1, 1]);
  expect((await run(schema, 'mutation { bumpLazy(id: "1") { id version } }')).data).toEqual({
    bumpLazy: { id: '1', version: 2 },
  });
  expect(await read('1')).toBe(2);
  expect(errors).toEqual([]);
  await cache.close();
});

/** The @cached schema transform on plain graphql-js: keys, bypasses, errors, batching, build errors. */
import { GraphQLError } from 'graphql';
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { cachedDirectiveTransformer, cachedFieldKey, cacheReport, herdcacheContext } from '../../src/graphql';
import { memoryStore } from '../../src/core/memory';
import { asyncStore, deferred } from '../helpers';
import { callCounter, makeSchema, run } from './fixtures';

const typeDefs = `
  input Filter { tag: String, range: Range }
  input Range { from: Int, to: Int }
  type Query {
    user(id: ID!): User @cached(ttl: 60)
    users(ids: [ID!]!): [User!]!
    search(filter: Filter, first: Int, json: JSON): [String!]! @cached(ttl: 60)
    broken(code: String!): String @cached(ttl: 60)
    nothing: String @cached(ttl: 60)
    nullish: String @cached(ttl: 60)
    promises: [Int!]! @cached(ttl: 60)
    plain: String @cached(ttl: 60)
    things: [Thing!]!
  }
  type User { id: ID!, name: String!, score: Int! @cached(ttl: 30, swr: 10) }
  type Thing { slug: String!, label: String! @cached(ttl: 60) }
  scalar JSON
`;

function setup(
  options: {
    store?: ReturnType<typeof memoryStore> | ReturnType<typeof asyncStore>['store'];
    clock?: ReturnType<typeof manualClock>;
    identity?: Record<string, string | ((p: any) => unknown)>;
  } = {},
) {
  const counter = callCounter();
  const cache = createCache({ ttl: Infinity, store: options.store, clock: options.clock });
  const schema = makeSchema(typeDefs, {
    Query: {
      user: (_p, { id }) => {
        counter.count(`user:${id}`);
        return { id, name: `user ${id}` };
      },
      users: (_p, { ids }) => ids.map((id: string) => ({ id, name: `user ${id}` })),
      search: (_p, args) => {
        counter.count('search');
        return [JSON.stringify(args)];
      },
      broken: (_p, { code }) => {
        counter.count('broken');
        if (code === 'plain') throw new Error('plain failure');
        throw new GraphQLError('forbidden here', { extensions: { code, detail: { n: 1 } } });
      },
      nothing: () => {
        counter.count('nothing');
        return undefined;
      },
      nullish: () => {
        counter.count('nullish');
        return null;
      },
      promises: () => {
        counter.count('promises');
        return [Promise.resolve(1), 2, Promise.resolve(3)];
      },
      things: () => [
        { slug: 'a', label: 'A' },
        { slug: 'b', label: 'B' },
      ],
    },
    User: {
      score: (user) => {
        counter.count(`score:${user.id}`);
        return Number(user.id) * 10;
      },
    },
  });
  // Query.plain has no resolver: the default resolver reads the root value.
  cachedDirectiveTransformer(schema, { cache, identity: options.identity });
  return { cache, schema, counter };
}

describe('@cached: caching through the registry', () => {
  it('runs a root field resolver once per key, across operations', async () => {
    const { schema, counter } = setup();
    for (let i = 0; i < 3; i++) {
      const result = await run(schema, '{ a: user(id: "1") { name } b: user(id: "2") { name } }');
      expect(result).toEqual({ data: { a: { name: 'user 1' }, b: { name: 'user 2' } } });
    }
    expect(counter.calls).toEqual({ 'user:1': 1, 'user:2': 1 });
  });

  it('coalesces concurrent operations into one resolver call', async () => {
    const { schema, counter } = setup();
    const results = await Promise.all(Array.from({ length: 50 }, () => run(schema, '{ user(id: "7") { id } }')));
    expect(results.every((r) => (r.data as any).user.id === '7')).toBe(true);
    expect(counter.calls['user:7']).toBe(1);
  });

  it('keys by canonical arguments: order of arguments and of input object fields is irrelevant', async () => {
    const { schema, counter } = setup();
    const a = await run(
      schema,
      '{ search(first: 2, filter: { range: { to: 5, from: 1 }, tag: "x" }, json: { b: 1, a: { d: 2, c: 3 } }) }',
    );
    const b = await run(
      schema,
      '{ search(json: { a: { c: 3, d: 2 }, b: 1 }, filter: { tag: "x", range: { from: 1, to: 5 } }, first: 2) }',
    );
    expect(b).toEqual(a);
    expect(counter.calls.search).toBe(1);
    await run(
      schema,
      '{ search(first: 2, filter: { range: { to: 6, from: 1 }, tag: "x" }, json: { b: 1, a: { d: 2, c: 3 } }) }',
    );
    await run(
      schema,
      '{ search(first: 2, filter: { range: { to: 5, from: 1 }, tag: "x" }, json: { b: 1, a: { d: 2, c: 4 } }) }',
    );
    expect(counter.calls.search).toBe(3);
  });

  it('variables and literals give the same key', async () => {
    const { schema, counter } = setup();
    await run(schema, '{ user(id: "3") { id } }');
    await run(schema, 'query Q($id: ID!) { user(id: $id) { id } }', {}, { id: '3' });
    expect(counter.calls['user:3']).toBe(1);
  });

  it('keys non-root fields by parent identity (default id): each parent gets its own value', async () => {
    const { schema, counter } = setup();
    const result = await run(schema, '{ users(ids: ["1", "2", "3"]) { id score } }');
    expect(result.data).toEqual({
      users: [
        { id: '1', score: 10 },
        { id: '2', score: 20 },
        { id: '3', score: 30 },
      ],
    });
    await run(schema, '{ users(ids: ["3", "2", "1"]) { score } }');
    expect(counter.calls).toEqual({ 'score:1': 1, 'score:2': 1, 'score:3': 1 });
  });

  it('a list of N siblings costs one store read for the N keys', async () => {
    const counting = asyncStore(memoryStore());
    const { schema, counter } = setup({ store: counting.store });
    const ids = Array.from({ length: 25 }, (_, i) => String(i + 1));
    const result = await run(schema, `{ users(ids: ${JSON.stringify(ids)}) { score } }`);
    expect((result.data as any).users).toHaveLength(25);
    expect(counting.calls.getMany).toBe(1);
    expect(counting.calls.getManyKeys[0]).toHaveLength(25);
    expect(new Set(counting.calls.getManyKeys[0]).size).toBe(25);
    expect(Object.keys(counter.calls)).toHaveLength(25);
    // Second operation: all hits, again one read.
    await run(schema, `{ users(ids: ${JSON.stringify(ids)}) { score } }`);
    expect(counting.calls.getMany).toBe(2);
    expect(Object.values(counter.calls).every((n) => n === 1)).toBe(true);
  });

  it('bypasses (and counts) a non-root field whose parent has no identity, never sharing a value', async () => {
    const cache = createCache({ ttl: Infinity });
    const seen: string[] = [];
    const schema = makeSchema(typeDefs, {
      Query: { things: () => [{ slug: 'a' }, { slug: 'b' }, { slug: 'c' }] },
      Thing: {
        label: (thing) => {
          seen.push(thing.slug);
          return thing.slug.toUpperCase();
        },
      },
    });
    const bypasses: string[] = [];
    cachedDirectiveTransformer(schema, {
      cache,
      onBypass: (coordinate, reason) => bypasses.push(`${coordinate} ${reason}`),
    });
    const ctx = herdcacheContext({ cache });
    const first = await run(schema, '{ things { label } }', ctx);
    expect(first.data).toEqual({ things: [{ label: 'A' }, { label: 'B' }, { label: 'C' }] });
    await run(schema, '{ things { label } }', herdcacheContext({ cache }));
    expect(seen).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
    expect(bypasses).toEqual(Array(6).fill('Thing.label no_identity'));
    expect(cacheReport(ctx)!.sources['Thing.label']).toMatchObject({ bypassed: 3, hits: 0, misses: 0 });
    expect(cacheReport(ctx)!.total.bypassed).toBe(3);
    // Nothing reached the registry: the field's source exists from the transform on (as a loader's
    // does from its creation), and counted nothing.
    expect(cache.metrics().sources['Thing.label']).toMatchObject({ hits: 0, misses: 0, coalesced: 0, fills: 0 });
  });

  it('identity per type: a property name or a function', async () => {
    for (const identity of [{ Thing: 'slug' }, { Thing: (t: { slug: string }) => `thing-${t.slug}` }]) {
      const counter = callCounter();
      const cache = createCache({ ttl: Infinity });
      const schema = makeSchema(typeDefs, {
        Query: { things: () => [{ slug: 'a' }, { slug: 'b' }, { slug: 'a' }] },
        Thing: {
          label: (t) => {
            counter.count(t.slug);
            return t.slug;
          },
        },
      });
      cachedDirectiveTransformer(schema, { cache, identity });
      const result = await run(schema, '{ things { label } }');
      await run(schema, '{ things { label } }');
      expect(result.data).toEqual({ things: [{ label: 'a' }, { label: 'b' }, { label: 'a' }] });
      expect(counter.calls).toEqual({ a: 1, b: 1 });
    }
  });

  it('errors and GraphQLErrors reach the client unchanged and are never cached', async () => {
    const { schema, counter } = setup();
    for (let i = 1; i <= 3; i++) {
      const result = await run(schema, '{ broken(code: "FORBIDDEN") }');
      expect(result.data).toEqual({ broken: null });
      expect(result.errors).toHaveLength(1);
      expect(result.errors![0]!.message).toBe('forbidden here');
      expect(result.errors![0]!.extensions).toEqual({ code: 'FORBIDDEN', detail: { n: 1 } });
      expect(result.errors![0]!.path).toEqual(['broken']);
      expect(counter.calls.broken).toBe(i);
    }
    const plain = await run(schema, '{ broken(code: "plain") }');
    expect(plain.errors![0]!.message).toBe('plain failure');
    expect(plain.errors![0]!.originalError).toBeInstanceOf(Error);
    expect(counter.calls.broken).toBe(4);
  });

  it('cachedFieldKey names the key of a call, for invalidation after a write', async () => {
    const { schema, cache, counter } = setup();
    await run(schema, '{ user(id: "1") { name } users(ids: ["2"]) { score } search(first: 1, filter: { tag: "t" }) }');
    await cache.invalidate([
      cachedFieldKey('Query.user', { args: { id: '1' } }),
      cachedFieldKey('User.score', { identity: 2 }),
      cachedFieldKey('Query.search', { args: { filter: { tag: 't' }, first: 1 } }),
    ]);
    await run(schema, '{ user(id: "1") { name } users(ids: ["2"]) { score } search(first: 1, filter: { tag: "t" }) }');
    expect(counter.calls).toEqual({ 'user:1': 2, 'score:2': 2, search: 2 });
  });

  it('caches null, not undefined', async () => {
    const { schema, counter } = setup();
    for (let i = 0; i < 3; i++) {
      expect((await run(schema, '{ nothing nullish }')).data).toEqual({ nothing: null, nullish: null });
    }
    expect(counter.calls).toEqual({ nothing: 3, nullish: 1 });
  });

  it('settles a list of promises before caching it', async () => {
    const store = memoryStore();
    const { schema, counter } = setup({ store });
    expect((await run(schema, '{ promises }')).data).toEqual({ promises: [1, 2, 3] });
    expect((await run(schema, '{ promises }')).data).toEqual({ promises: [1, 2, 3] });
    expect(counter.calls.promises).toBe(1);
    const [stored] = await store.getMany([cachedFieldKey('Query.promises')]);
    expect(stored?.value).toEqual([1, 2, 3]);
  });

  it('the default resolver works under the wrapper', async () => {
    const { schema } = setup();
    const result = await schema.getQueryType()!.getFields().plain!.resolve!({ plain: 'root value' }, {}, {}, {
      fieldName: 'plain',
    } as any);
    expect(result).toBe('root value');
  });

  it('ttl is in seconds; swr serves stale in seconds after it', async () => {
    const clock = manualClock();
    const { schema, counter } = setup({ clock });
    const q = '{ users(ids: ["4"]) { score } }';
    await run(schema, q);
    clock.advance(29_999);
    await run(schema, q);
    expect(counter.calls['score:4']).toBe(1);
    clock.advance(2); // 30.001 s: stale, within the 10 s grace → served, one refresh in the background
    const stale = await run(schema, q);
    expect(stale.data).toEqual({ users: [{ score: 40 }] });
    await new Promise((resolve) => setImmediate(resolve));
    expect(counter.calls['score:4']).toBe(2);
    clock.advance(40_001); // past ttl + grace of the refreshed entry
    await run(schema, q);
    expect(counter.calls['score:4']).toBe(3);
  });

  it('attributes loads to the operation when the context has one (herdcacheContext)', async () => {
    const { schema, cache } = setup();
    const ctx1 = herdcacheContext({ cache });
    await run(schema, '{ a: user(id: "1") { id } b: user(id: "1") { id } c: users(ids: ["1", "2"]) { score } }', ctx1);
    expect(cacheReport(ctx1)!.sources).toEqual({
      // Same key twice in one operation: the request memo answers the second, one registry load.
      'Query.user': {
        hits: 0,
        misses: 1,
        coalesced: 0,
        staleServed: 0,
        fills: 1,
        fillFailures: 0,
        lockContended: 0,
        bypassed: 0,
      },
      'User.score': {
        hits: 0,
        misses: 2,
        coalesced: 0,
        staleServed: 0,
        fills: 2,
        fillFailures: 0,
        lockContended: 0,
        bypassed: 0,
      },
    });
    const ctx2 = herdcacheContext({ cache });
    await run(schema, '{ user(id: "1") { id } }', ctx2);
    expect(cacheReport(ctx2)!.total).toMatchObject({ hits: 1, misses: 0, fills: 0 });
    // Registry metrics count under the coordinate label as well.
    expect(cache.metrics().sources['Query.user']).toMatchObject({ hits: 1, misses: 1, fills: 1 });
  });

  it('a stampede of concurrent operations: one fill, everyone else coalesced', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<void>();
    let calls = 0;
    const schema = makeSchema(typeDefs, {
      Query: {
        user: async (_p, { id }) => {
          calls++;
          await gate.promise;
          return { id, name: 'slow' };
        },
      },
    });
    cachedDirectiveTransformer(schema, { cache });
    const contexts = Array.from({ length: 100 }, () => herdcacheContext({ cache }));
    const pending = contexts.map((ctx) => run(schema, '{ user(id: "1") { name } }', ctx));
    await new Promise((resolve) => setImmediate(resolve));
    gate.resolve();
    const results = await Promise.all(pending);
    expect(results.every((r) => (r.data as any).user.name === 'slow')).toBe(true);
    expect(calls).toBe(1);
    const totals = contexts.map((ctx) => cacheReport(ctx)!.total);
    expect(totals.reduce((n, t) => n + t.misses, 0)).toBe(1);
    expect(totals.reduce((n, t) => n + t.coalesced, 0)).toBe(99);
    expect(totals.reduce((n, t) => n + t.fills, 0)).toBe(1);
  });
});

describe('@cached: PRIVATE', () => {
  const privateDefs = `type Query { me(n: Int): String @cached(ttl: 60, scope: PRIVATE) }`;

  it('keys by session; without a session it is not cached, and counted', async () => {
    const cache = createCache({ ttl: Infinity });
    const counter = callCounter();
    const schema = makeSchema(privateDefs, {
      Query: {
        me: (_p, { n }, ctx) => {
          counter.count(`${ctx.user ?? 'nobody'}:${n}`);
          return `${ctx.user ?? 'nobody'}:${n}`;
        },
      },
    });
    cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { user?: string }) => ctx.user });
    const as = (user: string | undefined) => ({ ...herdcacheContext({ cache }), user });
    expect((await run(schema, '{ me(n: 1) }', as('alice'))).data).toEqual({ me: 'alice:1' });
    expect((await run(schema, '{ me(n: 1) }', as('bob'))).data).toEqual({ me: 'bob:1' });
    expect((await run(schema, '{ me(n: 1) }', as('alice'))).data).toEqual({ me: 'alice:1' });
    const anonymous = as(undefined);
    expect((await run(schema, '{ me(n: 1) }', anonymous)).data).toEqual({ me: 'nobody:1' });
    expect((await run(schema, '{ me(n: 1) }', as(''))).data).toEqual({ me: ':1' });
    expect(counter.calls).toEqual({ 'alice:1': 1, 'bob:1': 1, 'nobody:1': 1, ':1': 1 });
    expect(cacheReport(anonymous)!.sources['Query.me']).toMatchObject({ bypassed: 1, misses: 0, hits: 0 });
  });

  it('a numeric session id (a user id 42) is a session; other non-strings are none', async () => {
    const cache = createCache({ ttl: Infinity });
    const counter = callCounter();
    const schema = makeSchema(privateDefs, {
      Query: {
        me: (_p, { n }, ctx) => {
          counter.count(`${String(ctx.user)}:${n}`);
          return `${String(ctx.user)}:${n}`;
        },
      },
    });
    cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { user?: unknown }) => ctx.user as number });
    const as = (user: unknown) => ({ ...herdcacheContext({ cache }), user });
    const first = as(42);
    expect((await run(schema, '{ me(n: 1) }', first)).data).toEqual({ me: '42:1' });
    expect((await run(schema, '{ me(n: 1) }', as(42))).data).toEqual({ me: '42:1' });
    expect(counter.calls).toEqual({ '42:1': 1 });
    expect(cacheReport(first)!.sources['Query.me']).toMatchObject({ bypassed: 0, misses: 1 });
    for (const none of [NaN, true, { id: 1 }]) {
      const context = as(none);
      await run(schema, '{ me(n: 1) }', context);
      expect(cacheReport(context)!.sources['Query.me']).toMatchObject({ bypassed: 1, misses: 0, hits: 0 });
    }
  });
});

describe('@cached: schema build errors name the field', () => {
  const cache = createCache({ ttl: Infinity });
  const build =
    (defs: string, options: Record<string, unknown> = {}) =>
    () =>
      cachedDirectiveTransformer(makeSchema(defs), { cache, ...options });

  it('refuses Mutation and Subscription fields', () => {
    expect(build('type Query { a: Int } type Mutation { createUser: Int @cached(ttl: 5) }')).toThrow(
      /@cached cannot be used on Mutation\.createUser: mutations/,
    );
    expect(build('type Query { a: Int } type Subscription { ticks: Int @cached(ttl: 5) }')).toThrow(
      /@cached cannot be used on Subscription\.ticks/,
    );
    // Custom root type names are recognized as well.
    expect(build('schema { query: Q, mutation: M } type Q { a: Int } type M { write: Int @cached(ttl: 5) }')).toThrow(
      /M\.write/,
    );
  });

  it('refuses interface fields', () => {
    expect(
      build('type Query { n: Node } interface Node { id: ID! @cached(ttl: 5) } type U implements Node { id: ID! }'),
    ).toThrow(/interface field Node\.id/);
  });

  it.each([
    ['ttl: 0', /@cached\(ttl:\) on Query\.a must be a positive integer number of seconds, got 0/],
    ['ttl: -5', /on Query\.a must be a positive integer number of seconds, got -5/],
    ['ttl: 1.5', /on Query\.a must be a positive integer number of seconds, got 1\.5/],
    ['ttl: "60"', /on Query\.a must be a positive integer number of seconds, got "60"/],
    ['ttl: 60, swr: -1', /@cached\(swr:\) on Query\.a must be an integer number of seconds >= 0, got -1/],
    ['ttl: 60, swr: 2.5', /@cached\(swr:\) on Query\.a .* got 2\.5/],
  ])('refuses @cached(%s)', (args, message) => {
    expect(build(`type Query { a: Int @cached(${args}) }`)).toThrow(message);
  });

  it('refuses PRIVATE without the sessionId option', () => {
    expect(build('type Query { a: Int @cached(ttl: 5, scope: PRIVATE) }')).toThrow(
      /PRIVATE\) on Query\.a needs the "sessionId" option/,
    );
    expect(build('type Query { a: Int @cached(ttl: 5, scope: PRIVATE) }', { sessionId: () => 's' })).not.toThrow();
  });

  it('refuses an identity entry for a type the schema lacks, and bad options', () => {
    expect(build('type Query { a: Int }', { identity: { Usr: 'id' } })).toThrow(
      /option "identity" must be keys naming object types of the schema, got "Usr"/,
    );
    expect(build('type Query { a: Int }', { identity: { Query: 3 } })).toThrow(/identity\.Query/);
    expect(build('type Query { a: Int }', { sessionId: 'ctx.user' })).toThrow(/option "sessionId"/);
    expect(() => cachedDirectiveTransformer(makeSchema('type Query { a: Int }'), { cache: {} as never })).toThrow(
      /option "cache"/,
    );
    expect(() => cachedDirectiveTransformer({} as never, { cache })).toThrow(/argument "schema"/);
  });

  it('refuses to transform a schema twice, and a failed build changes nothing', () => {
    const schema = makeSchema('type Query { a: Int @cached(ttl: 5) b: Int @cached(ttl: 0) }');
    const before = schema.getQueryType()!.getFields().a!.resolve;
    expect(() => cachedDirectiveTransformer(schema, { cache })).toThrow(/Query\.b/);
    expect(schema.getQueryType()!.getFields().a!.resolve).toBe(before);
    const ok = makeSchema('type Query { a: Int @cached(ttl: 5) }');
    expect(cachedDirectiveTransformer(ok, { cache })).toBe(ok);
    expect(() => cachedDirectiveTransformer(ok, { cache })).toThrow(/Query\.a is already wrapped/);
  });
});

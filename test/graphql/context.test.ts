/** herdcacheContext(): per-operation loaders and getOrCompute over the shared registry. */
import { createCache } from '../../src/core/cache';
import { cacheReport, herdcacheContext, requestScope } from '../../src/graphql';
import { makeSchema, run } from './fixtures';

function userLoaderFor(cache: ReturnType<typeof createCache>) {
  const batches: string[][] = [];
  const loader = cache.loader<string, { id: string; name: string }>({
    name: 'user',
    batch: (ids) => {
      batches.push([...ids]);
      return ids.map((id) => ({ id, name: `user ${id}` }));
    },
  });
  return { loader, batches };
}

describe('herdcacheContext', () => {
  it('gives resolvers ctx.loaders.<name>.load with per-operation memo and cross-operation batching', async () => {
    const cache = createCache({ ttl: Infinity });
    const { loader, batches } = userLoaderFor(cache);
    const schema = makeSchema('type Query { user(id: ID!): User } type User { id: ID!, name: String! }', {
      Query: { user: (_p, { id }, ctx) => ctx.loaders.user.load(id) },
    });
    const contexts = [0, 1, 2].map(() => herdcacheContext({ cache, loaders: { user: loader } }));
    const results = await Promise.all(
      contexts.map((ctx) =>
        run(schema, '{ a: user(id: "1") { name } b: user(id: "2") { name } c: user(id: "1") { id } }', ctx),
      ),
    );
    for (const result of results)
      expect(result.data).toEqual({ a: { name: 'user 1' }, b: { name: 'user 2' }, c: { id: '1' } });
    // Three concurrent operations, two distinct keys: one batch.
    expect(batches).toEqual([['1', '2']]);
    const totals = contexts.map((ctx) => cacheReport(ctx)!.sources.user!);
    // Each operation made two registry loads (the repeated "1" was answered by its own memo).
    expect(totals.map((t) => t.hits + t.misses + t.coalesced + t.staleServed)).toEqual([2, 2, 2]);
    expect(totals.reduce((n, t) => n + t.misses, 0)).toBe(2);
    expect(totals.reduce((n, t) => n + t.coalesced, 0)).toBe(4);
  });

  it('scope.getOrCompute is memoized per operation and attributed to it under its label', async () => {
    const cache = createCache({ ttl: Infinity });
    let computed = 0;
    const ctx = herdcacheContext({ cache });
    const fill = () => ++computed;
    const [a, b] = await Promise.all([
      ctx.scope.getOrCompute('top', fill, { ttl: 1000, label: 'Query.top' }),
      ctx.scope.getOrCompute('top', fill, { label: 'Query.top' }),
    ]);
    expect([a, b, computed]).toEqual([1, 1, 1]);
    expect(cacheReport(ctx)!.sources['Query.top']).toMatchObject({ misses: 1, fills: 1 });
    const next = herdcacheContext({ cache });
    expect(await requestScope(next)!.getOrCompute('top', fill, { label: 'Query.top' })).toBe(1);
    expect(cacheReport(next)!.total).toMatchObject({ hits: 1, misses: 0 });
  });

  it('survives being spread into a larger context', () => {
    const cache = createCache({ ttl: Infinity });
    const base = herdcacheContext({ cache });
    const ctx = { ...base, viewer: 'alice' };
    expect(requestScope(ctx)).toBe(base.scope);
    expect(requestScope({})).toBeUndefined();
    expect(requestScope(null)).toBeUndefined();
    expect(cacheReport({})).toBeUndefined();
  });

  it('each call is a new operation (no memo shared between them)', async () => {
    const cache = createCache({ ttl: Infinity });
    const { loader } = userLoaderFor(cache);
    const a = herdcacheContext({ cache, loaders: { user: loader } });
    const b = herdcacheContext({ cache, loaders: { user: loader } });
    expect(a.scope).not.toBe(b.scope);
    expect(a.loaders.user).not.toBe(b.loaders.user);
    a.loaders.user.prime('9', { id: '9', name: 'primed in a' });
    expect((await a.loaders.user.load('9')).name).toBe('primed in a');
    expect((await b.loaders.user.load('9')).name).toBe('user 9');
  });

  it('validates its options', () => {
    const cache = createCache({ ttl: Infinity });
    expect(() => herdcacheContext({ cache: {} as never })).toThrow(/option "cache"/);
    expect(() => herdcacheContext({ cache, loaders: { user: (() => 1) as never } })).toThrow(
      /option "loaders\.user" must be a loader/,
    );
    expect(() => herdcacheContext(undefined as never)).toThrow(/argument "options"/);
    // An array is no map of names (it would expose ctx.loaders[0]): refused as a whole.
    const users = cache.loader<string, string>({ name: 'ctx-users', batch: async (ids) => ids });
    expect(() => herdcacheContext({ cache, loaders: [users] as never })).toThrow(
      /option "loaders" must be an object of loaders by name, e.g. \{ user: cache.loader\(...\) \}, got array\(1\)/,
    );
  });
});

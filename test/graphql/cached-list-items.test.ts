/**
 * A @cached list field whose items do not all resolve is answered as graphql-js answers it without
 * a cache (each failed item an error at its own path, the other items kept) and is not cached;
 * coalesced callers get the same answer, and callers of another session none of the leader's errors.
 */
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer } from '../../src/graphql';
import { deferred } from '../helpers';
import { callCounter, makeSchema, run } from './fixtures';

const typeDefs = `
  type Query {
    numbers: [Int] @cached(ttl: 60)
    strict: [Int!] @cached(ttl: 60)
    items: [Item] @cached(ttl: 60)
    returned: [Int] @cached(ttl: 60)
  }
  type Item { id: ID!, n: Int }
`;

function setup(options: { sessions?: boolean; gate?: Promise<void> } = {}) {
  const counter = callCounter();
  let failing = true;
  const item = (n: number) => (failing && n === 2 ? Promise.reject(new Error(`item ${n} failed`)) : Promise.resolve(n));
  const cache = createCache();
  const schema = makeSchema(typeDefs, {
    Query: {
      numbers: async () => {
        counter.count('numbers');
        await options.gate;
        return [1, 2, 3].map(item);
      },
      strict: () => (counter.count('strict'), [1, 2, 3].map(item)),
      items: () => (
        counter.count('items'),
        [1, 2, 3].map((n) => item(n).then((value) => ({ id: String(n), n: value })))
      ),
      returned: () => (counter.count('returned'), [1, failing ? new Error('returned item failed') : 2, 3]),
    },
  });
  cachedDirectiveTransformer(schema, {
    cache,
    ...(options.sessions ? { sessionId: (ctx: { session?: string }) => ctx.session } : {}),
  });
  return { schema, counter, heal: () => (failing = false) };
}

const uncached = async (source: string) => {
  const schema = makeSchema(typeDefs, {
    Query: {
      numbers: () => [1, Promise.reject(new Error('item 2 failed')), 3],
      strict: () => [1, Promise.reject(new Error('item 2 failed')), 3],
      items: () => [{ id: '1', n: 1 }, Promise.reject(new Error('item 2 failed')), { id: '3', n: 3 }],
      returned: () => [1, new Error('returned item failed'), 3],
    },
  });
  return run(schema, source);
};

const summary = (result: Awaited<ReturnType<typeof run>>) => ({
  data: result.data,
  errors: result.errors?.map((error) => ({ message: error.message, path: error.path })),
});

it.each(['{ numbers }', '{ strict }', '{ items { id n } }', '{ returned }'])(
  '%s: answered item by item as without a cache, not cached, then cached once every item resolves',
  async (source) => {
    const { schema, counter, heal } = setup();
    const field = /\{ (\w+)/.exec(source)![1]!;
    const expected = summary(await uncached(source));
    expect(expected.errors).toHaveLength(1);
    expect(summary(await run(schema, source))).toEqual(expected);
    expect(summary(await run(schema, source))).toEqual(expected); // not cached: the resolver ran again
    expect(counter.calls[field]).toBe(2);
    heal();
    const healed = await run(schema, source);
    expect(healed.errors).toBeUndefined();
    await run(schema, source);
    expect(counter.calls[field]).toBe(3); // now cached
  },
);

it('coalesced callers get the same item-by-item answer from the one execution', async () => {
  const gate = deferred<void>();
  const { schema, counter } = setup({ gate: gate.promise });
  const pending = [run(schema, '{ numbers }'), run(schema, '{ numbers }'), run(schema, '{ numbers }')];
  gate.resolve();
  const results = await Promise.all(pending);
  expect(counter.calls.numbers).toBe(1);
  for (const result of results) {
    expect(result.data).toEqual({ numbers: [1, null, 3] });
    expect(result.errors?.map((error) => error.path)).toEqual([['numbers', 1]]);
  }
});

it('a caller of another session gets none of the leader’s item errors, nor its items', async () => {
  const gate = deferred<void>();
  const { schema, counter } = setup({ sessions: true, gate: gate.promise });
  const mine = run(schema, '{ numbers }', { session: 'ann' });
  const sameSession = run(schema, '{ numbers }', { session: 'ann' });
  const other = run(schema, '{ numbers }', { session: 'bob' });
  gate.resolve();
  const [a, b, c] = await Promise.all([mine, sameSession, other]);
  expect(counter.calls.numbers).toBe(1);
  for (const result of [a, b]) {
    expect(result.data).toEqual({ numbers: [1, null, 3] });
    expect(result.errors?.map((error) => [error.message, error.path])).toEqual([['item 2 failed', ['numbers', 1]]]);
  }
  expect(c.data).toEqual({ numbers: null });
  expect(c.errors?.[0]?.message).toMatch(/another session/);
  expect(c.errors?.[0]?.path).toEqual(['numbers']);
});

it('a field that is no list (a JSON scalar) holding an array with an Error: that error, never herdcache’s own', async () => {
  const cache = createCache();
  let calls = 0;
  const schema = makeSchema('scalar JSON\ntype Query { raw: JSON @cached(ttl: 60) }', {
    Query: { raw: () => (calls++, [1, new Error('item error'), 3]) },
  });
  cachedDirectiveTransformer(schema, { cache });
  for (let i = 1; i <= 2; i++) {
    const result = await run(schema, '{ raw }');
    expect(result.errors?.map((error) => error.message)).toEqual(['item error']);
    expect(calls).toBe(i); // not cached
  }
});

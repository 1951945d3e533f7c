/**
 * The @cached field's synchronous hit: a fresh value held in process is returned as it is (no
 * promise), counted exactly per operation, the same within an operation, keyed as cachedFieldKey
 * says. Counted in calls and values, never timed.
 */
import { execute, parse, type GraphQLObjectType } from 'graphql';
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { cachedDirectiveTransformer, cachedFieldKey, cacheReport, herdcacheContext } from '../../src/graphql';
import { asyncStore, entry, flush } from '../helpers';
import { makeSchema } from './fixtures';

const typeDefs = `
  type Query { items: [Item!]! top: Int! @cached(ttl: 60) }
  type Item { id: ID!, detail: Detail! @cached(ttl: 60, swr: 60), mine: String! @cached(ttl: 60, scope: PRIVATE) }
  type Detail { text: String! }
`;

function setup(store?: Store) {
  const clock = manualClock();
  const cache = createCache({ clock, store });
  let version = 1;
  const calls = { detail: 0, top: 0, mine: 0 };
  const items = [{ id: '1' }, { id: '2' }, { id: '1' }];
  const schema = makeSchema(typeDefs, {
    Query: {
      items: () => items,
      top: () => {
        calls.top++;
        return 7;
      },
    },
    Item: {
      detail: (item: { id: string }) => {
        calls.detail++;
        return { text: `detail ${item.id} v${version}` };
      },
      mine: (item: { id: string }, _args, context: { user: string }) => {
        calls.mine++;
        return `${context.user}:${item.id}`;
      },
    },
  });
  cachedDirectiveTransformer(schema, { cache, sessionId: (context: { user?: string }) => context.user });
  const field = (type: string, name: string) => (schema.getType(type) as GraphQLObjectType).getFields()[name]!.resolve!;
  return { cache, clock, schema, calls, field, bump: () => version++ };
}

const info = {} as never;

describe('@cached: the synchronous hit', () => {
  it('returns the value itself on a fresh in-process hit, a promise on a miss', async () => {
    const { cache, field } = setup();
    const detail = field('Item', 'detail');
    const miss = detail({ id: '1' }, {}, herdcacheContext({ cache }), info);
    expect(miss).toBeInstanceOf(Promise);
    expect(await miss).toEqual({ text: 'detail 1 v1' });
    const ctx = herdcacheContext({ cache });
    expect(detail({ id: '1' }, {}, ctx, info)).toEqual({ text: 'detail 1 v1' });
    // Without an operation scope in the context too.
    expect(detail({ id: '1' }, {}, {}, info)).toEqual({ text: 'detail 1 v1' });
    const top = field('Query', 'top');
    const topMiss = top(undefined, {}, {}, info);
    expect(topMiss).toBeInstanceOf(Promise);
    expect(await topMiss).toBe(7);
    expect(top(undefined, {}, {}, info)).toBe(7);
    expect(cacheReport(ctx)!.sources['Item.detail']).toMatchObject({ hits: 1, misses: 0 });
  });

  it('a store without synchronous reads still answers through promises', async () => {
    const { store } = asyncStore(memoryStore());
    const { cache, field } = setup(store);
    const detail = field('Item', 'detail');
    await detail({ id: '1' }, {}, {}, info);
    const again = detail({ id: '1' }, {}, herdcacheContext({ cache }), info);
    expect(again).toBeInstanceOf(Promise);
    expect(await again).toEqual({ text: 'detail 1 v1' });
  });

  it("counts hits per operation exactly, and repeats the operation's first answer for a repeated key", async () => {
    const { cache, clock, schema, calls, bump } = setup();
    const document = parse('{ items { id detail { text } } }');
    const first = await execute({ schema, document, contextValue: herdcacheContext({ cache }) });
    expect(calls.detail).toBe(2); // items 1 and 2; the second "1" joined the first within the operation
    const ctx = herdcacheContext({ cache });
    const warm = execute({ schema, document, contextValue: ctx });
    // Every field answered synchronously: graphql-js returns the result itself, not a promise.
    expect(warm).not.toBeInstanceOf(Promise);
    expect(warm).toEqual(first);
    // Two distinct keys read from the store; the repeated "1" answered from the operation's memo.
    expect(cacheReport(ctx)!.sources['Item.detail']).toMatchObject({ hits: 2, misses: 0, staleServed: 0 });
    // Stale: served (through a promise), counted as a stale serve, refreshed once.
    clock.advance(61_000);
    bump();
    const staleCtx = herdcacheContext({ cache });
    const stale = await execute({ schema, document, contextValue: staleCtx });
    expect(stale).toEqual(first);
    expect(cacheReport(staleCtx)!.sources['Item.detail']).toMatchObject({ staleServed: 2, hits: 0 });
    await flush();
    expect(calls.detail).toBe(4);
  });

  it('the same key gives the same answer within an operation even after the entry changes', async () => {
    const { cache, field, bump } = setup();
    const detail = field('Item', 'detail');
    await detail({ id: '1' }, {}, {}, info);
    const ctx = herdcacheContext({ cache });
    const first = detail({ id: '1' }, {}, ctx, info);
    bump();
    await cache.invalidate(cachedFieldKey('Item.detail', { identity: '1' }));
    await detail({ id: '1' }, {}, {}, info); // another operation refills it
    expect(detail({ id: '1' }, {}, {}, info)).toEqual({ text: 'detail 1 v2' });
    expect(detail({ id: '1' }, {}, ctx, info)).toBe(first);
  });

  it('an operation reading many keys (its memo grows) repeats each first answer and counts each key once', async () => {
    const { cache, field, bump } = setup();
    const detail = field('Item', 'detail');
    const ids = Array.from({ length: 300 }, (_, i) => String(i));
    for (const id of ids) await detail({ id }, {}, {}, info);
    const ctx = herdcacheContext({ cache });
    const firsts = ids.map((id) => detail({ id }, {}, ctx, info));
    // Another operation, interleaved, reads the same keys: each operation keeps its own answers.
    const other = herdcacheContext({ cache });
    for (const id of ids) detail({ id }, {}, other, info);
    bump();
    await cache.invalidate(ids.map((id) => cachedFieldKey('Item.detail', { identity: id })));
    for (const id of ids) await detail({ id }, {}, {}, info); // refilled with v2
    ids.forEach((id, i) => expect(detail({ id }, {}, ctx, info)).toBe(firsts[i]));
    expect(firsts[299]).toEqual({ text: 'detail 299 v1' });
    expect(detail({ id: '299' }, {}, herdcacheContext({ cache }), info)).toEqual({ text: 'detail 299 v2' });
    expect(cacheReport(ctx)!.sources['Item.detail']).toMatchObject({ hits: 300, misses: 0 });
    expect(cacheReport(other)!.sources['Item.detail']).toMatchObject({ hits: 300, misses: 0 });
  });

  it('past the per-field key bound (4096 identities) a key keeps one memo: the same answer, counted once', async () => {
    const { cache, field, bump } = setup();
    const detail = field('Item', 'detail');
    const ids = Array.from({ length: 4200 }, (_, i) => String(i));
    const ctx = herdcacheContext({ cache });
    for (const id of ids) await detail({ id }, {}, {}, info);
    const firsts = ids.map((id) => detail({ id }, {}, ctx, info));
    bump();
    await cache.invalidate(ids.map((id) => cachedFieldKey('Item.detail', { identity: id })));
    for (const id of ids) await detail({ id }, {}, {}, info);
    ids.forEach((id, i) => expect(detail({ id }, {}, ctx, info)).toBe(firsts[i]));
    expect(firsts[4199]).toEqual({ text: 'detail 4199 v1' });
    expect(cacheReport(ctx)!.sources['Item.detail']).toMatchObject({ hits: 4200, misses: 0 });
  });

  it('keys of calls without arguments are the keys cachedFieldKey gives (invalidation reaches them)', async () => {
    const { cache, field, calls } = setup();
    const detail = field('Item', 'detail');
    const top = field('Query', 'top');
    await detail({ id: '1' }, {}, {}, info);
    await detail({ id: 2 }, {}, {}, info); // a number identity is the same entity as "2"
    await top(undefined, {}, {}, info);
    expect(detail({ id: '2' }, {}, {}, info)).toEqual({ text: 'detail 2 v1' });
    await cache.invalidate([cachedFieldKey('Item.detail', { identity: '1' }), cachedFieldKey('Query.top')]);
    expect(detail({ id: '1' }, {}, {}, info)).toBeInstanceOf(Promise);
    expect(top(undefined, {}, {}, info)).toBeInstanceOf(Promise);
    expect(detail({ id: '2' }, {}, {}, info)).toEqual({ text: 'detail 2 v1' });
    expect(calls).toMatchObject({ detail: 2, top: 1 });
  });

  it('a warm key is answered from its slot: the store is looked up once per change, not per operation', async () => {
    const store = memoryStore();
    // Entries of other keys: the few writes here stay within a slot's recency window (memory.ts).
    await store.setMany(Array.from({ length: 20 }, (_, i) => ({ key: `filler${i}`, entry: entry(i), ttl: Infinity })));
    const { cache, schema, calls } = setup(store);
    const document = parse('{ items { id detail { text } } }');
    await execute({ schema, document, contextValue: herdcacheContext({ cache }) });
    const lookups = jest.spyOn(store, 'getSync');
    for (let i = 0; i < 10; i++) {
      const ctx = herdcacheContext({ cache });
      expect(execute({ schema, document, contextValue: ctx })).not.toBeInstanceOf(Promise);
      expect(cacheReport(ctx)!.sources['Item.detail']).toMatchObject({ hits: 2, misses: 0 });
    }
    expect(lookups).toHaveBeenCalledTimes(2); // items 1 and 2, by the first operation
    await cache.getOrCompute('unrelated', async () => 1, { ttl: 60_000 }); // a write of another key: the slots still answer
    expect(execute({ schema, document, contextValue: herdcacheContext({ cache }) })).not.toBeInstanceOf(Promise);
    expect(lookups.mock.calls.filter(([key]) => key.includes('Item.detail'))).toHaveLength(2);
    await cache.invalidateTags(['nothing-held']); // an invalidation: every slot is read again
    expect(execute({ schema, document, contextValue: herdcacheContext({ cache }) })).not.toBeInstanceOf(Promise);
    expect(lookups.mock.calls.filter(([key]) => key.includes('Item.detail'))).toHaveLength(4);
    expect(calls.detail).toBe(2);
  });

  it('a key answered from its slot is still judged by the clock: past its ttl, a miss', async () => {
    const { cache, clock, field, calls } = setup();
    const top = field('Query', 'top');
    await top(undefined, {}, herdcacheContext({ cache }), info);
    expect(top(undefined, {}, herdcacheContext({ cache }), info)).toBe(7);
    expect(top(undefined, {}, herdcacheContext({ cache }), info)).toBe(7); // from the slot
    clock.advance(60_001);
    const expired = top(undefined, {}, herdcacheContext({ cache }), info);
    expect(expired).toBeInstanceOf(Promise);
    expect(await expired).toBe(7);
    expect(calls.top).toBe(2);
  });

  it('PRIVATE values stay per session on the synchronous path', async () => {
    const { cache, field, calls } = setup();
    const mine = field('Item', 'mine');
    expect(await mine({ id: '1' }, {}, { user: 'ann' }, info)).toBe('ann:1');
    expect(await mine({ id: '1' }, {}, { user: 'bob' }, info)).toBe('bob:1');
    expect(mine({ id: '1' }, {}, { user: 'ann' }, info)).toBe('ann:1');
    expect(mine({ id: '1' }, {}, { ...herdcacheContext({ cache }), user: 'bob' }, info)).toBe('bob:1');
    expect(calls.mine).toBe(2);
  });
});

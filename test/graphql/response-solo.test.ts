/**
 * Solo runs (src/graphql/response-solo): a miss the admission leaves unstored, on the memory store,
 * executes without a flight of the registry's; a request asking it meanwhile waits for it (one
 * execution), and is handed its result only when nothing was invalidated while it ran.
 */
import { createCache, type Cache } from '../../src/core/cache';
import type { CacheHooks } from '../../src/core/types';
import { ResponseEngine, type Lookup, type ResponsePlan, type ResponseRequest } from '../../src/graphql/response-cache';
import { soloRunsOf } from '../../src/graphql/response-solo';
import { PAGE, pageSchema } from './response-fixture';

const schema = pageSchema();
const request = (n: number): ResponseRequest => ({ schema, document: PAGE, operationName: 'Page', variables: { n } , context: {} }); // prettier-ignore
const dataOf = (n: number, name = `item ${n}`) => ({ page: [{ id: String(n), name }] });
const planOf = (engine: ResponseEngine, n: number) => engine.plan(request(n)) as ResponsePlan;

/** Every request executing apart would be a second execution: none may. */
let apart = 0;
const executeApart = async () => {
  apart++;
  return { data: dataOf(0, 'apart') };
};

/** An engine whose operation Page is past its admission: 2 stored and unread, the next misses skipped. */
async function skipping(cache: Cache = createCache()): Promise<ResponseEngine> {
  const engine = new ResponseEngine(cache, { unreadLimit: 2 }, 'test');
  for (const n of [100, 101]) {
    const lookup = await engine.lookup(planOf(engine, n), executeApart);
    expect(await lookup.complete!({ data: dataOf(n) })).toBe('stored');
  }
  return engine;
}

/** Completes the lookups that execute (with `data`), returns every lookup once all are answered. */
async function answered(lookups: (Lookup | Promise<Lookup>)[], data: unknown): Promise<Lookup[]> {
  return Promise.all(
    lookups.map(async (pending) => {
      const lookup = await pending;
      if (lookup.complete !== undefined) await lookup.complete({ data });
      return lookup;
    }),
  );
}

const responseStats = (cache: Cache) => cache.metrics().sources.response!;
/** [the registry's flights, the solo runs]: cache.inFlight counts both. */
const inFlightOf = (cache: Cache) => [cache.inFlight - soloRunsOf(cache).size, soloRunsOf(cache).size];

beforeEach(() => {
  apart = 0;
});

describe('response layer: solo runs', () => {
  it('a skipped miss executes without a flight: nothing in flight while it runs, counted as a miss and a fill, not stored', async () => {
    const cache = createCache();
    const engine = await skipping(cache);
    const before = { ...responseStats(cache) };
    const leader = await engine.lookup(planOf(engine, 1), executeApart);
    expect(leader.outcome).toBe('miss');
    // A solo run: no flight of the registry's until complete(); in cache.inFlight all the same.
    expect(inFlightOf(cache)).toEqual([0, 1]);
    expect(cache.inFlight).toBe(1);
    expect(await leader.complete!({ data: dataOf(1) })).toBe('not_admitted');
    expect(inFlightOf(cache)).toEqual([0, 0]);
    expect(responseStats(cache).misses - before.misses).toBe(1);
    expect(responseStats(cache).fills - before.fills).toBe(1);
    // Asked a second time: admitted, through a flight, stored; then a hit.
    const second = await engine.lookup(planOf(engine, 1), executeApart);
    expect(inFlightOf(cache)).toEqual([1, 0]);
    expect(await second.complete!({ data: dataOf(1) })).toBe('stored');
    expect((await engine.lookup(planOf(engine, 1), executeApart)).outcome).toBe('hit');
  });

  it.each<[string, (cache: Cache) => void]>([
    ['a wrapFill hook (a tracer shows every fill call)', (cache) => void cache.observe({ wrapFill: (fill) => fill() })],
    ['a key held in flight by another execution', () => {}],
  ])('not solo with %s: a flight', async (_, setUp) => {
    const cache = createCache();
    const engine = await skipping(cache);
    setUp(cache);
    if (_.startsWith('a key held')) {
      // Page 7 asked twice: the second is admitted, a flight; a third lookup meanwhile joins it.
      const first = await engine.lookup(planOf(engine, 7), executeApart);
      await first.complete!({ data: dataOf(7) });
      const leader = await engine.lookup(planOf(engine, 7), executeApart);
      expect(inFlightOf(cache)).toEqual([1, 0]);
      const joiner = engine.lookup(planOf(engine, 7), executeApart);
      expect(await leader.complete!({ data: dataOf(7) })).toBe('stored');
      expect((await joiner).outcome).toBe('coalesced');
      return;
    }
    const leader = await engine.lookup(planOf(engine, 1), executeApart);
    expect(inFlightOf(cache)).toEqual([1, 0]);
    expect(await leader.complete!({ data: dataOf(1) })).toBe('not_admitted');
  });

  it('requests asking it meanwhile wait for it: one execution, stored and shared, counted as coalesced; the hooks told as for a flight', async () => {
    const cache = createCache();
    const seen: string[] = [];
    const hooks: CacheHooks = {
      onMiss: (_key, source) => seen.push(`miss ${source}`),
      onCoalesced: (_key, source) => seen.push(`coalesced ${source}`),
      onFill: (_key, source, ms, error) => seen.push(`fill ${source} ${typeof ms} ${String(error)}`),
    };
    const engine = await skipping(cache);
    cache.observe(hooks);
    const before = { ...responseStats(cache) };
    const leader = await engine.lookup(planOf(engine, 1), executeApart);
    expect(soloRunsOf(cache).size).toBe(1);
    const joiners = Array.from({ length: 4 }, async () => engine.lookup(planOf(engine, 1), executeApart));
    expect(await leader.complete!({ data: dataOf(1) })).toBe('stored');
    const joined = await Promise.all(joiners);
    expect(joined.map((j) => j.outcome)).toEqual(Array(4).fill('coalesced'));
    expect(joined.map((j) => j.response?.data)).toEqual(Array(4).fill(dataOf(1)));
    expect(apart).toBe(0);
    expect(responseStats(cache).coalesced - before.coalesced).toBe(4);
    expect(seen).toEqual(['miss response', ...Array(4).fill('coalesced response'), 'fill response number undefined']);
    // Stored: the next ask is a hit, and the joins were reads (the next misses are stored again).
    expect((await engine.lookup(planOf(engine, 1), executeApart)).outcome).toBe('hit');
    const next = await engine.lookup(planOf(engine, 2), executeApart);
    expect(inFlightOf(cache)).toEqual([1, 0]);
    expect(await next.complete!({ data: dataOf(2) })).toBe('stored');
  });

  it.each<[string, (cache: Cache) => Promise<unknown>]>([
    ['a tag of another entity', (cache) => cache.invalidateTags(['Other:9'])],
    ['a tag of its result', (cache) => cache.invalidateTags(['Item:1'])],
    ['another key', (cache) => cache.invalidate(['some-key'])],
    ['a clear', (cache) => cache.clear()],
  ])(
    'an invalidation while it runs (%s): its waiters never get its result; they start over and share one execution, stored',
    async (_, invalidate) => {
      const cache = createCache();
      const engine = await skipping(cache);
      const leader = await engine.lookup(planOf(engine, 1), executeApart);
      const joiners = Array.from({ length: 3 }, () => engine.lookup(planOf(engine, 1), executeApart));
      await invalidate(cache);
      expect(await leader.complete!({ data: dataOf(1, 'before the invalidation') })).toBe('invalidated');
      const after = await answered(joiners, dataOf(1, 'after'));
      expect(after.map((j) => j.outcome).sort()).toEqual(['coalesced', 'coalesced', 'miss']);
      for (const j of after) if (j.response !== undefined) expect(j.response.data).toEqual(dataOf(1, 'after'));
      expect(apart).toBe(0);
      const read = await engine.lookup(planOf(engine, 1), executeApart);
      expect(read.outcome).toBe('hit');
      expect(read.response!.data).toEqual(dataOf(1, 'after'));
    },
  );

  it('a result that cannot be shared (errors): its waiters contend again and share one execution', async () => {
    const engine = await skipping();
    const leader = await engine.lookup(planOf(engine, 1), executeApart);
    const joiners = Array.from({ length: 3 }, () => engine.lookup(planOf(engine, 1), executeApart));
    expect(await leader.complete!({ errors: [new Error('backend down')], data: null })).toBe('errors');
    const after = await answered(joiners, dataOf(1));
    expect(after.map((j) => j.outcome).sort()).toEqual(['coalesced', 'coalesced', 'miss']);
    expect(apart).toBe(0);
  });

  it('close() while it runs: a waiter executes itself (the cache unavailable), nothing left waiting', async () => {
    const cache = createCache();
    const engine = await skipping(cache);
    const leader = await engine.lookup(planOf(engine, 1), executeApart);
    const joiner = engine.lookup(planOf(engine, 1), executeApart);
    await cache.close();
    expect(await leader.complete!({ data: dataOf(1) })).toBe('invalidated');
    expect(await joiner).toMatchObject({ outcome: 'bypassed', bypassReason: 'cache_unavailable' });
  });
});

/**
 * The response layer's admission (src/graphql/response-admission): an operation whose stored
 * responses are never read stops paying for a store write on every miss, a read brings storing
 * back, and what is not stored is still shared (one execution) and still fenced by invalidations.
 * The plugins' reporting of it over HTTP: test/apollo/response-cache-options.test.ts.
 */
import { parse } from 'graphql';
import { createCache } from '../../src/core/cache';
import { ResponseEngine, type ResponsePlan, type ResponseRequest } from '../../src/graphql/response-cache';
import { PAGE, pageSchema } from './response-fixture';

const schema = pageSchema();

const request = (n: number, document = PAGE): ResponseRequest => ({
  schema,
  document,
  operationName: 'Page',
  variables: { n },
  context: {},
});
const dataOf = (n: number) => ({ page: [{ id: String(n), name: `item ${n}` }] });

/** Requests page n: what the lookup answered, and (for a miss) what became of its result. */
async function ask(engine: ResponseEngine, n: number, document = PAGE): Promise<string> {
  const plan = engine.plan(request(n, document)) as ResponsePlan;
  const lookup = await engine.lookup(plan, async () => ({ data: dataOf(n) }));
  if (lookup.outcome !== 'miss') return lookup.outcome;
  return lookup.complete!({ data: dataOf(n) });
}

describe('response layer: admission of an operation whose responses are not read', () => {
  it('after unreadLimit unread stores, 1 in unreadLimit misses is stored, then 1 in twice as many; a read stores every miss again', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 4 }, 'test');
    const first: string[] = [];
    for (let n = 0; n < 20; n++) first.push(await ask(engine, n));
    // 4 stored, then 3 not, the 4th skipped one stored; then 7 not, the 8th stored; …
    expect(first).toEqual([
      'stored', 'stored', 'stored', 'stored',
      'not_admitted', 'not_admitted', 'not_admitted', 'stored',
      'not_admitted', 'not_admitted', 'not_admitted', 'not_admitted',
      'not_admitted', 'not_admitted', 'not_admitted', 'stored',
      'not_admitted', 'not_admitted', 'not_admitted', 'not_admitted',
    ]); // prettier-ignore
    // What was not stored is a miss again, stored this time (asked a second time); what was stored, a hit.
    expect(await ask(engine, 5)).toBe('stored');
    expect(await ask(engine, 7)).toBe('hit');
    // That read ends the skipping and restarts the sample at 1 in 4: the next misses are stored.
    for (let n = 100; n < 104; n++) expect(await ask(engine, n)).toBe('stored');
    const again: string[] = [];
    for (let n = 104; n < 108; n++) again.push(await ask(engine, n));
    expect(again).toEqual(['not_admitted', 'not_admitted', 'not_admitted', 'stored']);
  });

  it.each([2, 3, 4, 8])(
    'a page asked once in every %i requests, among pages asked once, is stored at its second miss, then read',
    async (period) => {
      const engine = new ResponseEngine(createCache(), { unreadLimit: 4 }, 'test');
      for (let n = 0; n < 4; n++) expect(await ask(engine, n)).toBe('stored');
      const popular: string[] = [];
      let once = 100;
      for (let i = 0; i < 40; i++) {
        if (i % period === 0) popular.push(await ask(engine, 1000));
        else await ask(engine, once++);
      }
      // A fixed 1-in-4 sample alone fell on the one-off pages every time for periods 2 and 4.
      expect(popular.slice(0, 3)).toEqual(['not_admitted', 'stored', 'hit']);
      expect(popular.slice(2).every((outcome) => outcome === 'hit')).toBe(true);
    },
  );

  it('among 5,000 pages asked once, the sample grows rarer down to 1 in 32 × unreadLimit, and a read stores every miss again', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 2 }, 'test');
    const outcomes: string[] = [];
    for (let n = 0; n < 5000; n++) outcomes.push(await ask(engine, n));
    // 2 stored; then 1 in 2, 4, 8, 16, 32 (62 misses, 5 stored); then 1 in 64 of the other 4,936.
    expect(outcomes.filter((outcome) => outcome === 'stored').length).toBe(2 + 5 + Math.floor(4936 / 64));
    // n = 0 and 1 were stored: a hit (a read) stores every miss again.
    expect(await ask(engine, 1)).toBe('hit');
    expect(await ask(engine, 4)).toBe('stored'); // an even n past 1 was left unstored
    expect(await ask(engine, 4)).toBe('hit');
  });

  it('per operation: another operation of the same engine is stored while the first is skipped', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 2 }, 'test');
    for (let n = 0; n < 2; n++) expect(await ask(engine, n)).toBe('stored');
    expect(await ask(engine, 2)).toBe('not_admitted');
    const other = parse('query Page($n: Int!) { page(n: $n) { name id } }');
    expect(await ask(engine, 2, other)).toBe('stored');
  });

  it('a request naming the only operation and one not naming it are one operation (Yoga passes the name as given)', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 2 }, 'test');
    for (const n of [0, 1]) expect(await ask(engine, n)).toBe('stored'); // named 'Page'
    expect(await ask(engine, 2)).toBe('not_admitted');
    // A nameless request reads page 0 (one key with the named one's): a read of the operation.
    const nameless = engine.plan({ ...request(0), operationName: undefined }) as ResponsePlan;
    expect(nameless.policy).toBe((engine.plan(request(0)) as ResponsePlan).policy);
    expect((await engine.lookup(nameless, async () => ({ data: dataOf(0) }))).outcome).toBe('hit');
    expect(await ask(engine, 3)).toBe('stored');
  });

  it('an invalidation while an unstored miss runs leaves it be (its own request alone gets it)', async () => {
    const cache = createCache();
    const engine = new ResponseEngine(cache, { unreadLimit: 2 }, 'test');
    for (const n of [10, 11]) expect(await ask(engine, n)).toBe('stored');
    const leader = await engine.lookup(engine.plan(request(1)) as ResponsePlan, async () => ({ data: dataOf(1) }));
    await cache.invalidateTags(['Other:1']);
    expect(await leader.complete!({ data: dataOf(1) })).toBe('not_admitted');
  });

  it('only what was written counts: results invalidated while they ran are no stores', async () => {
    const cache = createCache();
    const engine = new ResponseEngine(cache, { unreadLimit: 2 }, 'test');
    for (const n of [0, 1]) {
      const leader = await engine.lookup(engine.plan(request(n)) as ResponsePlan, async () => ({ data: dataOf(n) }));
      await cache.invalidateTags([`Item:${n}`]);
      expect(await leader.complete!({ data: dataOf(n) })).toBe('invalidated');
    }
    expect(await ask(engine, 2)).toBe('stored');
    expect(await ask(engine, 3)).toBe('stored');
    expect(await ask(engine, 4)).toBe('not_admitted');
  });

  it('requests waiting through another plugin on the same cache count as waiters: stored and shared, one execution', async () => {
    const cache = createCache();
    const a = new ResponseEngine(cache, { unreadLimit: 3 }, 'test');
    const b = new ResponseEngine(cache, { unreadLimit: 3 }, 'test'); // another server on the same cache
    for (const n of [10, 11, 12]) expect(await ask(a, n)).toBe('stored');
    expect(await ask(a, 13)).toBe('not_admitted'); // a's operation is skipped: its next miss alone would be too
    let apart = 0;
    const executeApart = async () => {
      apart++;
      return { data: dataOf(1) };
    };
    const leader = await a.lookup(a.plan(request(1)) as ResponsePlan, executeApart);
    const joiners = Array.from({ length: 3 }, async () => b.lookup(b.plan(request(1)) as ResponsePlan, executeApart));
    expect(await leader.complete!({ data: dataOf(1) })).toBe('stored');
    expect((await Promise.all(joiners)).map((j) => j.outcome)).toEqual(['coalesced', 'coalesced', 'coalesced']);
    expect(apart).toBe(0);
  });

  it('unreadLimit: false stores every response', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: false }, 'test');
    for (let n = 0; n < 100; n++) expect(await ask(engine, n)).toBe('stored');
  });

  it('the default stores 32 in a row', async () => {
    const engine = new ResponseEngine(createCache(), true, 'test');
    const outcomes: string[] = [];
    for (let n = 0; n < 33; n++) outcomes.push(await ask(engine, n));
    expect(outcomes.slice(0, 32).every((o) => o === 'stored')).toBe(true);
    expect(outcomes[32]).toBe('not_admitted');
  });

  it('a miss other requests wait on is stored and shared whatever the rule says (one execution); the joins count as reads', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 3 }, 'test');
    for (const n of [10, 11, 12]) expect(await ask(engine, n)).toBe('stored');
    expect(await ask(engine, 13)).toBe('not_admitted'); // skipping now: the next miss alone would not be stored either
    const plan = () => engine.plan(request(1)) as ResponsePlan;
    let apart = 0;
    const executeApart = async () => {
      apart++;
      return { data: dataOf(1) };
    };
    const leader = await engine.lookup(plan(), executeApart);
    const joiners = Array.from({ length: 5 }, async () => engine.lookup(plan(), executeApart));
    expect(leader.outcome).toBe('miss');
    expect(await leader.complete!({ data: dataOf(1) })).toBe('stored');
    const joined = await Promise.all(joiners);
    expect(joined.map((j) => j.outcome)).toEqual(Array(5).fill('coalesced'));
    expect(joined.map((j) => j.response?.data)).toEqual(Array(5).fill(dataOf(1)));
    expect(apart).toBe(0);
    expect(await ask(engine, 1)).toBe('hit');
    // The joins were reads: the next misses are stored again.
    for (const n of [2, 3]) expect(await ask(engine, n)).toBe('stored');
  });

  it("a result not stored is the executing request's alone: a request joining as it is handed over executes itself", async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 2 }, 'test');
    for (const n of [10, 11]) expect(await ask(engine, n)).toBe('stored');
    const plan = () => engine.plan(request(1)) as ResponsePlan;
    const executeApart = async () => ({ data: dataOf(1) });
    const leader = await engine.lookup(plan(), executeApart);
    // Nobody waits when it completes: not stored. A lookup made in the same step joins the flight
    // before it ends, and is handed the unstored result: it contends again and executes.
    const completing = leader.complete!({ data: { page: [{ id: '1', name: 'the leader changed this' }] } });
    const late = engine.lookup(plan(), executeApart);
    expect(await completing).toBe('not_admitted');
    const again = await late;
    expect(again.outcome).toBe('miss');
    expect(again.response).toBeUndefined();
    expect(await again.complete!({ data: dataOf(1) })).toBe('stored'); // nobody waits, yet not skipped: 1 in 2
  });

  it('what was not stored counts nothing: results too large are not stores, and keep their reason', async () => {
    const engine = new ResponseEngine(createCache(), { unreadLimit: 2, maxBytes: 10 }, 'test');
    const outcomes: string[] = [];
    for (let n = 0; n < 6; n++) outcomes.push(await ask(engine, n));
    expect(outcomes).toEqual(Array(6).fill('oversized'));
  });

  it.each([0, -1, 1.5, 2e9, '4', true, null])('unreadLimit: %p is refused, naming the option', (value) => {
    expect(() => new ResponseEngine(createCache(), { unreadLimit: value as never }, 'test')).toThrow(
      `option "responseCache.unreadLimit" must be false or an integer from 1 to 1e9, got ${String(value === '4' ? '"4"' : value)}`,
    );
  });
});

import { createCache, memoryStore } from '../../src/core';
import { asyncStore } from '../helpers';

// The hits, misses and stale answers of one dispatch are counted in runs (one per source and
// request scope in a row): every load still counts once, in the registry and in its own request.
describe('outcomes counted once per load, in runs of a dispatch', () => {
  async function setup(hooks?: { onHit?: (key: string) => void }) {
    const { store, calls } = asyncStore(memoryStore());
    const cache = createCache({ ttl: Infinity, store, hooks });
    const a = cache.loader<string, string>({ name: 'a', batch: async (ids) => ids.map((id) => `a${id}`) });
    const b = cache.loader<string, string>({ name: 'b', batch: async (ids) => ids.map((id) => `b${id}`) });
    const keys = Array.from({ length: 10 }, (_, i) => `${i}`);
    // Warm: a's keys 0-9, b's keys 0-4 (b's 5-9 miss below).
    await Promise.all([...keys.map((k) => a.load(k)), ...keys.slice(0, 5).map((k) => b.load(k))]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { cache, a, b, keys, calls };
  }

  it('two requests and two loaders interleaved in one getMany: each request gets its own exact counts', async () => {
    const { cache, a, b, keys, calls } = await setup();
    const before = cache.metrics().sources;
    const reads = calls.getMany;
    const one = cache.request();
    const two = cache.request();
    const [oa, ob, ta] = [one.loader(a), one.loader(b), two.loader(a)];
    const loads: Promise<string>[] = [];
    for (const k of keys) loads.push(oa.load(k), ob.load(k));
    for (const k of keys.slice(0, 3)) loads.push(ta.load(`x${k}`)); // two's own misses
    for (const k of keys.slice(3)) loads.push(ta.load(k)); // two's hits, after one's in the same read
    await Promise.all(loads);
    expect(calls.getMany - reads).toBe(1);
    expect(one.stats().sources.a).toMatchObject({ hits: 10, misses: 0, coalesced: 0 });
    expect(one.stats().sources.b).toMatchObject({ hits: 5, misses: 5, coalesced: 0 });
    expect(two.stats().sources.a).toMatchObject({ hits: 7, misses: 3, coalesced: 0 });
    expect(two.stats().total).toMatchObject({ hits: 7, misses: 3 });
    const after = cache.metrics().sources;
    expect(after.a!.hits - before.a!.hits).toBe(17);
    expect(after.a!.misses - before.a!.misses).toBe(3);
    expect(after.b!.hits - before.b!.hits).toBe(5);
    expect(after.b!.misses - before.b!.misses).toBe(5);
  });

  it('with an onHit observer every hit is still told, key by key', async () => {
    const told: string[] = [];
    const { cache, a, keys } = await setup({ onHit: (key) => told.push(key) });
    told.length = 0;
    const request = cache.request();
    const scope = request.loader(a);
    await Promise.all(keys.map((k) => scope.load(k)));
    expect(told).toHaveLength(10);
    expect(request.stats().sources.a).toMatchObject({ hits: 10, misses: 0 });
  });
});

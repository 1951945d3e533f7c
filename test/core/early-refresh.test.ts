/** Probabilistic early refresh (XFetch), with Math.random pinned and a manual clock. */
import { createCache, manualClock, memoryStore } from '../../src/core';
import { flush } from '../helpers';

afterEach(() => jest.restoreAllMocks());

function setup(earlyRefresh: boolean | number = true) {
  const clock = manualClock();
  const store = memoryStore();
  const cache = createCache({ clock, store, ttl: 1000, earlyRefresh });
  let version = 0;
  const fill = jest.fn(async () => {
    clock.advance(100); // the fill "takes" 100 ms of the cache's clock
    return ++version;
  });
  return { clock, store, cache, fill };
}

describe('early refresh (XFetch)', () => {
  it('records how long the fill took in the entry', async () => {
    const { cache, store, fill } = setup();
    await cache.getOrCompute('k', fill);
    expect(store.getSync('k')!.fillMs).toBe(100);
  });

  it('near expiry a read refreshes in the background and is still answered at once with the fresh value', async () => {
    const { cache, clock, fill } = setup();
    await cache.getOrCompute('k', fill);
    clock.advance(950); // 50 ms before expiry (freshUntil = t0 + 100 + 1000)
    // -100 * ln(0.5) ≈ 69 ms ≥ 50 ms left: refresh.
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    expect(await cache.getOrCompute('k', fill)).toBe(1);
    await flush();
    expect(fill).toHaveBeenCalledTimes(2);
    expect(await cache.getOrCompute('k', fill)).toBe(2);
    expect(cache.metrics().total).toMatchObject({ refreshes: 1, hits: 2, staleServed: 0 });
  });

  it('far from expiry the same draw does not refresh', async () => {
    const { cache, clock, fill } = setup();
    await cache.getOrCompute('k', fill);
    clock.advance(500); // 600 ms left; -100 * ln(0.5) ≈ 69 ms
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    await cache.getOrCompute('k', fill);
    await flush();
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it('a larger beta refreshes earlier', async () => {
    const { cache, clock, fill } = setup(10);
    await cache.getOrCompute('k', fill);
    clock.advance(500); // 600 ms left; -100 * 10 * ln(0.5) ≈ 693 ms
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    await cache.getOrCompute('k', fill);
    await flush();
    expect(fill).toHaveBeenCalledTimes(2);
  });

  it('is off by default', async () => {
    const clock = manualClock();
    const store = memoryStore();
    const cache = createCache({ clock, store, ttl: 1000 });
    const fill = jest.fn(async () => {
      clock.advance(100);
      return 1;
    });
    await cache.getOrCompute('k', fill);
    expect(store.getSync('k')!.fillMs).toBeUndefined();
    clock.advance(999);
    jest.spyOn(Math, 'random').mockReturnValue(1e-9);
    await cache.getOrCompute('k', fill);
    await flush();
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it('concurrent readers near expiry start one refresh, not one each', async () => {
    const { cache, clock, fill } = setup();
    await cache.getOrCompute('k', fill);
    clock.advance(990);
    jest.spyOn(Math, 'random').mockReturnValue(0.01);
    await Promise.all(Array.from({ length: 100 }, () => cache.getOrCompute('k', fill)));
    await flush();
    expect(fill).toHaveBeenCalledTimes(2);
  });

  it('rejects a bad beta naming the option', () => {
    expect(() => createCache({ earlyRefresh: -1 })).toThrow(/option "earlyRefresh" .* got -1/);
    expect(() => createCache({ earlyRefresh: 'yes' as never })).toThrow(/option "earlyRefresh"/);
  });
});

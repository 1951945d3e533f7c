/**
 * getOrCompute reuses the last resolution of its options while a call's option values are the
 * same: a mutated options object, or a new one, never gets the policy of the values it had before.
 * Counted in fills, on a manual clock.
 */
import { HerdcacheError, createCache, manualClock } from '../../src/core';

describe('getOrCompute options: resolution reused by value, never stale', () => {
  it('a mutated ttl applies from the next call', async () => {
    const clock = manualClock();
    const cache = createCache({ clock });
    let fills = 0;
    const fill = async () => ++fills;
    const options: { ttl: number; label?: string } = { ttl: 1_000 };
    await cache.getOrCompute('a', fill, options);
    options.ttl = 10;
    await cache.getOrCompute('b', fill, options); // stored with ttl 10
    clock.advance(20);
    await cache.getOrCompute('a', fill, options); // ttl 1000 when stored: still fresh
    expect(fills).toBe(2);
    await cache.getOrCompute('b', fill, options); // expired under ttl 10 (under 1000 it would hit)
    expect(fills).toBe(3);
    // The same values in a new object: the same policy.
    await cache.getOrCompute('c', fill, { ttl: 10 });
    clock.advance(20);
    await cache.getOrCompute('c', fill, { ttl: 10 });
    expect(fills).toBe(5);
  });

  it('a mutated label counts under the new label; a mutated bad value or unknown name is refused', async () => {
    const cache = createCache();
    const options: { ttl: number; label?: string; tll?: number } = { ttl: 1_000, label: 'one' };
    await cache.getOrCompute('a', async () => 1, options);
    options.label = 'two';
    await cache.getOrCompute('b', async () => 2, options);
    const sources = cache.metrics().sources;
    expect(sources.one).toMatchObject({ misses: 1, fills: 1 });
    expect(sources.two).toMatchObject({ misses: 1, fills: 1 });
    options.ttl = -1;
    const bad = await cache.getOrCompute('c', async () => 3, options).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(HerdcacheError);
    expect((bad as HerdcacheError).message).toContain('ttl');
    options.ttl = 1_000;
    options.tll = 5;
    const unknown = await cache.getOrCompute('d', async () => 4, options).catch((e: unknown) => e);
    expect((unknown as HerdcacheError).code).toBe('E_INVALID_OPTION');
    expect((unknown as HerdcacheError).message).toContain('tll');
  });

  it('tags are resolved on every call: a tags array mutated in place tags the next value', async () => {
    const cache = createCache();
    const tags = ['x'];
    let fills = 0;
    const options = { ttl: 60_000, tags };
    await cache.getOrCompute('a', async () => ++fills, options);
    tags[0] = 'y';
    await cache.getOrCompute('b', async () => ++fills, options);
    await cache.invalidateTags(['y']);
    await cache.getOrCompute('a', async () => ++fills, options); // tagged x: still there
    await cache.getOrCompute('b', async () => ++fills, options); // tagged y: refilled
    expect(fills).toBe(3);
  });
});

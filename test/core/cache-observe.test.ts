/** cache.observe(hooks): observers added after createCache (what the Apollo plugin uses for fill durations). */
import { createCache } from '../../src/core/cache';
import type { CacheHooks } from '../../src/core/types';

describe('cache.observe', () => {
  it('calls options.hooks and every observer, in order, until removed', async () => {
    const calls: string[] = [];
    const cache = createCache({
      ttl: Infinity,
      hooks: { onMiss: (key) => calls.push(`own miss ${key}`), onFill: (key) => calls.push(`own fill ${key}`) },
    });
    const stop = cache.observe({
      onFill: (key, source, ms, error) => calls.push(`obs fill ${key} ${source} ${typeof ms} ${String(error)}`),
    });
    await cache.getOrCompute('a', () => 1, { label: 'Query.a' });
    expect(calls).toEqual(['own miss a', 'own fill a', 'obs fill a Query.a number undefined']);
    stop();
    stop(); // idempotent
    calls.length = 0;
    await cache.getOrCompute('b', () => 2);
    expect(calls).toEqual(['own miss b', 'own fill b']);
  });

  it("wrapFill's info holds what docs/operations.md lists: its own fields, and callers read when asked", async () => {
    const seen: Record<string, unknown>[] = [];
    const cache = createCache({ ttl: Infinity });
    cache.observe({
      wrapFill: async (fill, info) => {
        const before = { ...info, callers: info.callers };
        await fill();
        seen.push({ ...before, failures: info.failures });
        return undefined as never;
      },
    });
    await Promise.all([cache.getOrCompute('a', () => 1, { label: 'Query.a' }), cache.getOrCompute('a', () => 1)]);
    expect(seen).toEqual([
      { source: 'Query.a', keys: ['a'], background: false, lock: 'none', callers: 2, failures: 0 },
    ]);
  });

  it('a throwing observer breaks neither the load nor the next observer', async () => {
    const seen: string[] = [];
    const cache = createCache({ ttl: Infinity });
    cache.observe({
      onHit() {
        throw new Error('observer bug');
      },
    });
    cache.observe({ onHit: (key) => seen.push(key) });
    await cache.getOrCompute('k', () => 'v');
    await expect(cache.getOrCompute('k', () => 'other')).resolves.toBe('v');
    expect(seen).toEqual(['k']);
  });

  it('removing one of two identical observers keeps the other', async () => {
    const seen: string[] = [];
    const hooks: CacheHooks = { onMiss: (key) => seen.push(key) };
    const cache = createCache({ ttl: Infinity });
    const stopFirst = cache.observe(hooks);
    cache.observe(hooks);
    stopFirst();
    await cache.getOrCompute('x', () => 1);
    expect(seen).toEqual(['x']);
  });

  it('rejects a non-object', () => {
    const cache = createCache({ ttl: Infinity });
    expect(() => cache.observe(null as unknown as CacheHooks)).toThrow(/argument "hooks"/);
  });
});

/**
 * Coalesce-only (`ttl: 0`, and the default when no ttl is given): nothing is stored, yet
 * concurrent misses still share one fill and one batch call per tick, and a request scope still
 * memoizes. The store is never touched: no read, no lock, no write, no delete.
 */
import { createCache, manualClock, type Store } from '../../src/core';
import { deferred, flush } from '../helpers';
import { LockingStore } from '../helpers/lock-store';

/** A store with a fill lock whose every call (store and lock) is counted by name. */
function touchCountingStore() {
  const inner = new LockingStore(manualClock());
  const touches: string[] = [];
  const count = <T extends object>(target: T, prefix: string): T =>
    new Proxy(target, {
      get(obj, prop, receiver) {
        const value = Reflect.get(obj, prop, receiver);
        if (typeof value !== 'function' || prop === 'bind') return value;
        return (...args: unknown[]) => {
          touches.push(`${prefix}${String(prop)}`);
          return (value as (...a: unknown[]) => unknown).apply(obj, args);
        };
      },
    });
  const store = count(inner as Store, '');
  Object.defineProperty(store, 'lock', { value: count(inner.lock, 'lock.') });
  return { store, touches, inner };
}

describe('coalesce-only: no ttl means nothing stored, misses still coalesced', () => {
  it('with no ttl, each sequential getOrCompute fills again; concurrent ones share one fill; the store is never touched', async () => {
    const { store, touches } = touchCountingStore();
    const cache = createCache({ store });
    let fills = 0;
    const gate = deferred<void>();
    const fill = async () => {
      fills++;
      await gate.promise;
      return `v${fills}`;
    };
    const concurrent = Promise.all([
      cache.getOrCompute('k', fill),
      cache.getOrCompute('k', fill),
      cache.getOrCompute('k', fill),
    ]);
    await flush();
    gate.resolve();
    expect(await concurrent).toEqual(['v1', 'v1', 'v1']);
    expect(fills).toBe(1);
    expect(await cache.getOrCompute('k', fill)).toBe('v2'); // not stored: the next caller fills
    expect(cache.metrics().total).toMatchObject({ misses: 2, coalesced: 2, hits: 0, fills: 2 });
    expect(touches).toEqual([]);
  });

  it('a loader with no ttl: two requests in one tick share one batch call of unique keys; later loads batch again; no store call', async () => {
    const { store, touches } = touchCountingStore();
    const cache = createCache({ store });
    const batches: string[][] = [];
    const users = cache.loader<string, string>({
      name: 'user',
      batch: async (ids) => (batches.push([...ids]), ids.map((id) => `u${id}`)),
    });
    const a = cache.request().loader(users);
    const b = cache.request().loader(users);
    expect(await Promise.all([a.load('1'), a.load('2'), b.load('2'), b.load('3')])).toEqual(['u1', 'u2', 'u2', 'u3']);
    expect(batches).toEqual([['1', '2', '3']]);
    // The request memo still answers within a request; another request fetches again.
    expect(await a.load('1')).toBe('u1');
    expect(await cache.request().loader(users).load('1')).toBe('u1');
    expect(batches).toEqual([['1', '2', '3'], ['1']]);
    await users.prime('9', 'primed'); // nothing to store
    await users.clear('1'); // nothing stored to delete
    await users.clearMany(['1', '2']);
    expect(await users.load('9')).toBe('u9');
    expect(touches).toEqual([]);
  });

  it('ttl: 0 on a loader makes it coalesce-only under a cache that stores', async () => {
    const { store, touches } = touchCountingStore();
    const cache = createCache({ store, ttl: 60_000 });
    let calls = 0;
    const fresh = cache.loader<string, number>({ name: 'fresh', ttl: 0, batch: async (ids) => ids.map(() => ++calls) });
    const kept = cache.loader<string, number>({ name: 'kept', batch: async (ids) => ids.map(() => ++calls) });
    expect(await fresh.load('a')).toBe(1);
    expect(await fresh.load('a')).toBe(2);
    expect(touches).toEqual([]);
    expect(await kept.load('a')).toBe(3);
    expect(await kept.load('a')).toBe(3); // stored: the explicit ttl is honoured
    expect(touches.length).toBeGreaterThan(0);
  });

  it('per-call ttl: 0 on getOrCompute skips the store; a stored value is not read either', async () => {
    const { store, touches, inner } = touchCountingStore();
    const cache = createCache({ store, ttl: 60_000 });
    await cache.getOrCompute('k', () => 'stored');
    expect(inner.entries.getSync('k')?.value).toBe('stored');
    touches.length = 0;
    expect(await cache.getOrCompute('k', () => 'fresh', { ttl: 0 })).toBe('fresh');
    expect(touches).toEqual([]);
  });

  it('swr or earlyRefresh asked for where nothing is stored is a configuration error naming the option', () => {
    expect(() => createCache({ swr: 30_000 })).toThrow(/option "swr" must be 0 when ttl is 0 .*set a ttl/);
    expect(() => createCache({ earlyRefresh: true })).toThrow(/option "earlyRefresh" must be off when ttl is 0/);
    const cache = createCache();
    expect(() => cache.loader({ name: 'x', batch: async (k: readonly string[]) => k, swr: 5 })).toThrow(
      expect.objectContaining({ code: 'E_INVALID_OPTION' }),
    );
    // Inherited grace is not "asked for": a coalesce-only loader under a cache with swr is fine.
    const storing = createCache({ ttl: 1_000, swr: 5_000 });
    expect(() => storing.loader({ name: 'y', ttl: 0, batch: async (k: readonly string[]) => k })).not.toThrow();
  });

  it('a coalesce-only fill in flight is still abandoned by an invalidation: its waiters start over', async () => {
    const cache = createCache();
    const gates = [deferred<string>(), deferred<string>()];
    let call = 0;
    const fill = () => gates[call++]!.promise;
    const first = cache.getOrCompute('k', fill);
    await flush();
    await cache.invalidate('k');
    gates[0]!.resolve('old');
    await flush();
    gates[1]!.resolve('new');
    expect(await first).toBe('new');
  });
});

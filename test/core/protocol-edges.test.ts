/**
 * Edges found by review and by mutation testing: each load counts once (also across retries and
 * aborts), a caller's abort never spreads to other callers of a request, loader keys and names
 * cannot collide, prime wins over an older fill in flight, bad options fail before any fill
 * starts, abort listeners are removed, locks are never orphaned or shared between registries.
 */
import { getEventListeners } from 'node:events';
import { HerdcacheError, createCache, manualClock } from '../../src/core';
import type { Counters } from '../../src/core';
import { deferred, flush } from '../helpers';
import { LockingStore } from '../helpers/lock-store';

const sum = (t: Counters) => t.hits + t.misses + t.coalesced + t.staleServed;

describe('counting, scopes, keys, prime', () => {
  it('a waiter re-contending after invalidate is counted once', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<string>();
    let n = 0;
    const fill = () => (++n === 1 ? gate.promise : Promise.resolve('v2'));
    const a = cache.getOrCompute('k', fill);
    const b = cache.getOrCompute('k', fill);
    await flush();
    await cache.invalidate('k');
    gate.resolve('v1');
    await Promise.all([a, b]);
    // 2 loads
    expect(sum(cache.metrics().total)).toBe(2);
  });

  it("request scope: one caller's abort does not reject another caller of the same key", async () => {
    const cache = createCache({ ttl: Infinity });
    const users = cache.loader<number, string>({
      name: 'u',
      batch: async (ids) => {
        await new Promise((r) => setTimeout(r, 20));
        return ids.map(String);
      },
    });
    const scope = cache.request();
    const ac = new AbortController();
    const first = scope.load(users, 1, { signal: ac.signal });
    const second = scope.load(users, 1); // no signal: must not be disturbed
    first.catch(() => {});
    ac.abort(new Error('gone'));
    await expect(second).resolves.toBe('1');
  });

  it("request scope getOrCompute: one caller's abort does not reject another", async () => {
    const cache = createCache({ ttl: Infinity });
    const scope = cache.request();
    const ac = new AbortController();
    const fill = () => new Promise<string>((r) => setTimeout(() => r('v'), 20));
    const first = scope.getOrCompute('k', fill, { signal: ac.signal });
    const second = scope.getOrCompute('k', fill);
    first.catch(() => {});
    ac.abort(new Error('gone'));
    await expect(second).resolves.toBe('v');
  });

  it('loader.clear takes one key, even a composite (array) key', async () => {
    const cache = createCache({ ttl: Infinity });
    const l = cache.loader<[string, string], string>({
      name: 'p',
      key: ([a, b]) => `${a}/${b}`,
      batch: async (ks) => ks.map(([a, b]) => a + b),
    });
    await l.load(['a', 'b']);
    await l.clear(['a', 'b']);
    expect(cache.metrics().sources.p!.invalidations).toBe(1);
  });

  it("prime during a fill in flight is not overwritten by the older fill's result", async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<string[]>();
    const l = cache.loader<string, string>({ name: 'u', batch: () => gate.promise });
    const p = l.load('1');
    await flush();
    await l.prime('1', 'new');
    gate.resolve(['old']);
    await p;
    expect(await l.load('1')).toBe('new');
  });

  it('scoped loadMany(non-array) throws a TypeError at once, as DataLoader (a programming error, not a failed load)', () => {
    const cache = createCache({ ttl: Infinity });
    const l = cache.loader<string, string>({ name: 'u', batch: async (ks) => ks });
    const scope = cache.request();
    expect(() => scope.loader(l).loadMany('abc' as never)).toThrow(TypeError);
    expect(() => scope.loader(l).loadMany('abc' as never)).toThrow(
      expect.objectContaining({
        code: 'E_INVALID_KEY',
        message: expect.stringContaining('loadMany() must be called with an array of keys, got "abc"'),
      }),
    );
  });

  it('a leader whose only caller aborts before dispatch is still counted once (a miss)', async () => {
    const cache = createCache({ ttl: Infinity });
    const ac = new AbortController();
    const p = cache.getOrCompute('k', () => new Promise(() => {}), { signal: ac.signal });
    p.catch(() => {});
    ac.abort();
    await flush();
    expect(sum(cache.metrics().total)).toBe(1);
  });
});

describe('bad input before any fill starts', () => {
  it('getOrCompute(key, fill, null) gives a HerdcacheError naming options', async () => {
    const cache = createCache({ ttl: Infinity });
    const err = await cache.getOrCompute('k', async () => 1, null as never).catch((e: unknown) => e as HerdcacheError);
    expect(err).toBeInstanceOf(HerdcacheError);
  });
  it('a signal that is not an AbortSignal gives a HerdcacheError naming signal', async () => {
    const cache = createCache({ ttl: Infinity });
    const err = await cache
      .getOrCompute('k', async () => 1, { signal: {} as never })
      .catch((e: unknown) => e as HerdcacheError);
    expect(err).toBeInstanceOf(HerdcacheError);
    expect(err).toMatchObject({
      code: 'E_INVALID_OPTION',
      message: expect.stringContaining('option "signal" must be an AbortSignal'),
    });
  });
  it('loader names cannot contain ":" ("a" and "a:b" would share keys)', () => {
    const cache = createCache({ ttl: Infinity });
    cache.loader<string, string>({ name: 'a', batch: async (ks) => ks.map((k) => `from a ${k}`) });
    expect(() => cache.loader<string, string>({ name: 'a:b', batch: async (ks) => ks })).toThrow(
      /option "name" must be a non-empty string without ":".*got "a:b"/,
    );
  });
  it('a non-function hook is rejected at configuration time', () => {
    expect(() => createCache({ ttl: Infinity, hooks: { onHit: 'nope' as never } })).toThrow(HerdcacheError);
  });
});

describe('protocol steps that had no test', () => {
  it('a waiter with a signal is woken by invalidate and re-contends (no hang)', async () => {
    const cache = createCache({ ttl: Infinity });
    const stuck = deferred<string>();
    let n = 0;
    const fill = () => (++n === 1 ? stuck.promise : Promise.resolve('fresh'));
    const ac = new AbortController();
    const p = cache.getOrCompute('k', fill, { signal: ac.signal });
    await flush();
    await cache.invalidate('k');
    await expect(p).resolves.toBe('fresh');
    expect(n).toBe(2);
  });

  it('a settled load removes its abort listener from a long-lived signal', async () => {
    const cache = createCache({ ttl: Infinity });
    const ac = new AbortController();
    for (let i = 0; i < 10; i++) await cache.getOrCompute(`k${i}`, async () => i, { signal: ac.signal });
    await expect(
      cache.getOrCompute(
        'bad',
        async () => {
          throw new Error('x');
        },
        { signal: ac.signal },
      ),
    ).rejects.toThrow('x');
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });

  it('a background refresh is not counted as a miss', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 10_000 });
    let n = 0;
    const fill = async () => ++n;
    await cache.getOrCompute('k', fill);
    clock.advance(2000);
    expect(await cache.getOrCompute('k', fill)).toBe(1); // stale served, refresh starts
    await flush();
    expect(n).toBe(2);
    const t = cache.metrics().total;
    expect([t.misses, t.staleServed, t.hits, t.coalesced]).toEqual([1, 1, 0, 0]);
  });
});

describe('fill locks are never orphaned or shared', () => {
  it('a lock won for a flight abandoned during acquire is released', async () => {
    const clock = manualClock();
    const store = new LockingStore(clock);
    const cache = createCache({ ttl: Infinity, store, clock });
    const ac = new AbortController();
    const acquire = store.lock.acquire;
    (store.lock as { acquire: typeof acquire }).acquire = (...args: Parameters<typeof acquire>) => {
      ac.abort(); // the only caller leaves while the lock call is in flight
      return acquire(...args);
    };
    let fills = 0;
    const p = cache.getOrCompute('k', async () => ++fills, { signal: ac.signal }).catch(() => 'aborted');
    expect(await p).toBe('aborted');
    await flush();
    expect(fills).toBe(0);
    expect(store.locks.size).toBe(0);
  });

  it('two registries never share a lock token (an expired holder cannot write over the new one)', async () => {
    const clock = manualClock();
    const store = new LockingStore(clock);
    const a = createCache({ ttl: Infinity, store, clock, lockTtl: 1000 });
    const b = createCache({ ttl: Infinity, store, clock, lockTtl: 1000 });
    const gateA = deferred<string>();
    const gateB = deferred<string>();
    const pa = a.getOrCompute('k', () => gateA.promise);
    await flush();
    clock.advance(1001); // A's lock expired while A still fills
    const pb = b.getOrCompute('k', () => gateB.promise);
    await flush();
    gateA.resolve('A (late)');
    await pa;
    await flush();
    expect(store.entries.getSync('k')).toBeUndefined(); // fenced: A no longer holds the lock
    expect(store.locks.size).toBe(1); // and B's lock is not released by A
    gateB.resolve('B');
    expect(await pb).toBe('B');
    expect(store.entries.getSync('k')?.value).toBe('B');
  });
});

import { GraphQLError } from 'graphql';
import { HerdcacheError, createCache, manualClock, memoryStore } from '../../src/core';
import { asyncStore, countingStore, deferred, flush } from '../helpers';

describe('single-flight (getOrCompute)', () => {
  it('runs fill once for concurrent misses of one key; every caller gets the result', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<string>();
    let fills = 0;
    const fill = () => {
      fills++;
      return gate.promise;
    };
    const callers = Array.from({ length: 200 }, () => cache.getOrCompute('k', fill));
    await flush();
    gate.resolve('value');
    const results = await Promise.all(callers);
    expect(fills).toBe(1);
    expect(results.every((r) => r === 'value')).toBe(true);
    const { total } = cache.metrics();
    expect(total.misses).toBe(1);
    expect(total.coalesced).toBe(199);
    expect(total.fills).toBe(1);
    expect(cache.inFlight).toBe(0);
  });

  it('fills different keys concurrently (no global lock)', async () => {
    const cache = createCache({ ttl: Infinity });
    const gates = { a: deferred<string>(), b: deferred<string>() };
    const started: string[] = [];
    const fill = ({ key }: { key: string }) => {
      started.push(key);
      return gates[key as 'a' | 'b'].promise;
    };
    const a = cache.getOrCompute('a', fill);
    const b = cache.getOrCompute('b', fill);
    await flush();
    // Both fills are running at once: neither waits for the other to finish.
    expect(started.sort()).toEqual(['a', 'b']);
    gates.b.resolve('B');
    expect(await b).toBe('B');
    gates.a.resolve('A');
    expect(await a).toBe('A');
  });

  it('two distinct caches never coalesce with each other', async () => {
    const one = createCache({ ttl: Infinity });
    const two = createCache({ ttl: Infinity });
    let fills = 0;
    const fill = async () => {
      fills++;
      return 1;
    };
    await Promise.all([one.getOrCompute('k', fill), two.getOrCompute('k', fill)]);
    expect(fills).toBe(2);
  });

  it('serves the cached value afterwards without calling fill', async () => {
    const cache = createCache({ ttl: Infinity });
    const fill = jest.fn(async () => 'v');
    await cache.getOrCompute('k', fill);
    expect(await cache.getOrCompute('k', fill)).toBe('v');
    expect(fill).toHaveBeenCalledTimes(1);
    expect(cache.metrics().total.hits).toBe(1);
  });
});

describe('failure never poisons', () => {
  it('leader and coalesced callers receive the same error object; nothing is written; next caller retries', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<string>();
    const error = new GraphQLError('db down', { extensions: { code: 'DB_DOWN', retryable: true } });
    let fills = 0;
    const failing = () => {
      fills++;
      return gate.promise;
    };
    const callers = Array.from({ length: 10 }, () => cache.getOrCompute('k', failing).catch((e: unknown) => e));
    await flush();
    gate.reject(error);
    const errors = await Promise.all(callers);
    expect(fills).toBe(1);
    for (const e of errors) {
      expect(e).toBe(error);
      expect((e as GraphQLError).extensions).toEqual({ code: 'DB_DOWN', retryable: true });
    }
    expect(cache.inFlight).toBe(0);
    expect(cache.metrics().total.fillFailures).toBe(1);
    // The key is not poisoned: the next caller runs its own fill.
    expect(await cache.getOrCompute('k', async () => 'recovered')).toBe('recovered');
    expect(await cache.getOrCompute('k', async () => 'unused')).toBe('recovered');
  });

  it('a synchronous throw in fill is a failure like any other', async () => {
    const cache = createCache({ ttl: Infinity });
    const error = new Error('sync boom');
    await expect(
      cache.getOrCompute('k', () => {
        throw error;
      }),
    ).rejects.toBe(error);
    expect(cache.inFlight).toBe(0);
  });

  it('a fill that throws a non-Error gives a clear coded error that keeps the thrown value as cause', async () => {
    const cache = createCache({ ttl: Infinity });
    const rejection = cache.getOrCompute('k', () => {
      throw 'plain string';
    });
    await expect(rejection).rejects.toMatchObject({ code: 'E_FILL_NON_ERROR', cause: 'plain string' });
    await expect(rejection).rejects.toThrow(/non-Error value: "plain string"/);
  });
});

describe('double-check', () => {
  it('the leader re-reads the store after winning leadership: a value written in between is not recomputed', async () => {
    const { store } = countingStore(memoryStore());
    const cache = createCache({ ttl: Infinity, store });
    const fill = jest.fn(async () => 'computed');
    const pending = cache.getOrCompute('k', fill);
    // Written after the caller's own read, before its dispatch: e.g. by another writer.
    await store.setMany([
      { key: 'k', entry: { value: 'written', freshUntil: Infinity, staleUntil: Infinity }, ttl: Infinity },
    ]);
    expect(await pending).toBe('written');
    expect(fill).not.toHaveBeenCalled();
  });

  it('on an asynchronous store the keys missed in one tick are read in one getMany', async () => {
    const { store, calls } = asyncStore(memoryStore());
    const cache = createCache({ ttl: Infinity, store });
    await Promise.all(['a', 'b', 'c'].map((k) => cache.getOrCompute(k, async () => k)));
    expect(calls.getMany).toBe(1);
    expect(calls.getManyKeys[0]!.sort()).toEqual(['a', 'b', 'c']);
    expect(calls.setMany).toBe(3); // one fill each, written as each lands
  });
});

describe('cancellation', () => {
  it('a caller that aborts stops waiting without disturbing the others', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<string>();
    let fillSignal: AbortSignal | undefined;
    const fill = ({ signal }: { signal: AbortSignal }) => {
      fillSignal = signal;
      return gate.promise;
    };
    const controller = new AbortController();
    const leaving = cache.getOrCompute('k', fill, { signal: controller.signal });
    const staying = cache.getOrCompute('k', fill);
    await flush();
    const reason = new Error('client went away');
    controller.abort(reason);
    await expect(leaving).rejects.toBe(reason);
    expect(fillSignal!.aborted).toBe(false);
    gate.resolve('v');
    expect(await staying).toBe('v');
  });

  it("the fill's signal fires only when every caller waiting on it has aborted", async () => {
    const cache = createCache({ ttl: Infinity });
    let fillSignal: AbortSignal | undefined;
    const fill = ({ signal }: { signal: AbortSignal }) => {
      fillSignal = signal;
      return new Promise<string>(() => {}); // never settles on its own
    };
    const c1 = new AbortController();
    const c2 = new AbortController();
    const p1 = cache.getOrCompute('k', fill, { signal: c1.signal }).catch((e: unknown) => e);
    const p2 = cache.getOrCompute('k', fill, { signal: c2.signal }).catch((e: unknown) => e);
    await flush();
    c1.abort();
    await p1;
    expect(fillSignal!.aborted).toBe(false);
    c2.abort();
    await p2;
    expect(fillSignal!.aborted).toBe(true);
    expect((fillSignal!.reason as HerdcacheError).code).toBe('E_ABANDONED');
    // The abandoned flight is gone: the next caller starts afresh.
    expect(cache.inFlight).toBe(0);
    expect(await cache.getOrCompute('k', async () => 'fresh')).toBe('fresh');
  });

  it('an already-aborted signal rejects at once and starts no fill', async () => {
    const cache = createCache({ ttl: Infinity });
    const fill = jest.fn(async () => 1);
    const controller = new AbortController();
    controller.abort(new Error('too late'));
    await expect(cache.getOrCompute('k', fill, { signal: controller.signal })).rejects.toThrow('too late');
    await flush();
    expect(fill).not.toHaveBeenCalled();
  });

  it('the result of an abandoned fill is not written', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<string>();
    const controller = new AbortController();
    const p = cache.getOrCompute('k', () => gate.promise, { signal: controller.signal }).catch(() => 'aborted');
    await flush();
    controller.abort();
    expect(await p).toBe('aborted');
    gate.resolve('late');
    await flush();
    expect(await cache.getOrCompute('k', async () => 'next')).toBe('next');
  });

  it('invalidate wakes the waiters of a stuck fill so they retry (seed 004)', async () => {
    const cache = createCache({ ttl: Infinity });
    let attempt = 0;
    let firstSignal: AbortSignal | undefined;
    const fill = ({ signal }: { signal: AbortSignal }) => {
      attempt++;
      if (attempt === 1) {
        firstSignal = signal;
        return new Promise<string>(() => {}); // stuck forever
      }
      return Promise.resolve(`attempt ${attempt}`);
    };
    const waiters = [cache.getOrCompute('k', fill), cache.getOrCompute('k', fill), cache.getOrCompute('k', fill)];
    await flush();
    expect(attempt).toBe(1);
    await cache.invalidate('k');
    // They re-contend: one new fill, shared by all three.
    expect(await Promise.all(waiters)).toEqual(['attempt 2', 'attempt 2', 'attempt 2']);
    expect(attempt).toBe(2);
    expect(firstSignal!.aborted).toBe(true);
    expect((firstSignal!.reason as HerdcacheError).code).toBe('E_INVALIDATED');
  });

  it('clear() wakes waiters of every stuck fill', async () => {
    const cache = createCache({ ttl: Infinity });
    let stuck = true;
    const fill = ({ key }: { key: string }) => (stuck ? new Promise<string>(() => {}) : Promise.resolve(key));
    const a = cache.getOrCompute('a', fill);
    const b = cache.getOrCompute('b', fill);
    await flush();
    stuck = false;
    await cache.clear();
    expect(await Promise.all([a, b])).toEqual(['a', 'b']);
  });
});

describe('TTL and jitter', () => {
  it('a value is fresh until ttl, then recomputed', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000 });
    let n = 0;
    const fill = async () => ++n;
    expect(await cache.getOrCompute('k', fill)).toBe(1);
    clock.advance(999);
    expect(await cache.getOrCompute('k', fill)).toBe(1);
    clock.advance(1);
    expect(await cache.getOrCompute('k', fill)).toBe(2);
  });

  it('ttl unset means never stale', async () => {
    const clock = manualClock();
    const cache = createCache({ ttl: Infinity, clock });
    let n = 0;
    await cache.getOrCompute('k', async () => ++n);
    clock.advance(10 * 365 * 24 * 3600 * 1000);
    expect(await cache.getOrCompute('k', async () => ++n)).toBe(1);
  });

  it('the jitter option de-synchronises keys written together', async () => {
    const clock = manualClock();
    const store = memoryStore();
    const cache = createCache({ clock, store, ttl: 100_000, jitter: 0.5 });
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    await Promise.all(keys.map((k) => cache.getOrCompute(k, async () => k)));
    const expiries = new Set(keys.map((k) => store.getSync(k)!.freshUntil - clock.now()));
    expect(expiries.size).toBeGreaterThan(40);
    for (const ttl of expiries) {
      expect(ttl).toBeGreaterThanOrEqual(50_000);
      expect(ttl).toBeLessThanOrEqual(150_000);
    }
  });

  it('a per-call ttl overrides the cache default', async () => {
    const clock = manualClock();
    const store = memoryStore();
    const cache = createCache({ clock, store, ttl: 1000 });
    await cache.getOrCompute('k', async () => 1, { ttl: 50 });
    expect(store.getSync('k')!.freshUntil - clock.now()).toBe(50);
  });
});

describe('stale-while-revalidate', () => {
  it('past ttl within grace: the stale value is returned at once and exactly one background refresh runs', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 5000 });
    await cache.getOrCompute('k', async () => 'v1');
    clock.advance(1500);
    const gate = deferred<string>();
    let refreshes = 0;
    const refresh = () => {
      refreshes++;
      return gate.promise;
    };
    const served = await Promise.all(Array.from({ length: 100 }, () => cache.getOrCompute('k', refresh)));
    expect(served.every((v) => v === 'v1')).toBe(true);
    await flush();
    expect(refreshes).toBe(1);
    gate.resolve('v2');
    await flush();
    expect(await cache.getOrCompute('k', refresh)).toBe('v2');
    expect(refreshes).toBe(1);
    const { total } = cache.metrics();
    expect(total.staleServed).toBe(100);
    expect(total.refreshes).toBe(1);
  });

  it('past ttl + grace it is a cold miss: callers wait for the fill', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 500 });
    await cache.getOrCompute('k', async () => 'old');
    clock.advance(1500);
    expect(await cache.getOrCompute('k', async () => 'new')).toBe('new');
    expect(cache.metrics().total.staleServed).toBe(0);
  });

  it('a failed refresh keeps the stale value', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 5000 });
    await cache.getOrCompute('k', async () => 'v1');
    clock.advance(1001);
    expect(
      await cache.getOrCompute('k', async () => {
        throw new Error('refresh failed');
      }),
    ).toBe('v1');
    await flush();
    expect(cache.metrics().total.fillFailures).toBe(1);
    // Still served stale; a later read schedules another refresh, which succeeds.
    expect(await cache.getOrCompute('k', async () => 'v2')).toBe('v1');
    await flush();
    expect(await cache.getOrCompute('k', async () => 'v3')).toBe('v2');
  });

  it('caps concurrent background refreshes; a refresh that cannot start is dropped, not queued', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 60_000, maxRefreshes: 2 });
    const keys = ['a', 'b', 'c', 'd'];
    await Promise.all(keys.map((k) => cache.getOrCompute(k, async () => `${k}1`)));
    clock.advance(2000);
    const gates = new Map<string, ReturnType<typeof deferred<string>>>();
    const refresh = ({ key }: { key: string }) => {
      const gate = deferred<string>();
      gates.set(key, gate);
      return gate.promise;
    };
    expect(await Promise.all(keys.map((k) => cache.getOrCompute(k, refresh)))).toEqual(['a1', 'b1', 'c1', 'd1']);
    await flush();
    expect(gates.size).toBe(2);
    expect(cache.metrics().total.refreshesDropped).toBe(2);
    for (const gate of gates.values()) gate.resolve('x');
    await flush();
    // Slots are free again: the dropped keys refresh on their next read.
    await Promise.all(keys.map((k) => cache.getOrCompute(k, refresh)));
    await flush();
    expect(gates.size).toBe(4);
  });

  /** Key `k` filled with 'v1', now stale within its grace (ttl 1 s, swr 0.5 s); `refresh` answers `answer()`, its calls and signal noted. */
  async function staleKey(answer: () => Promise<string>) {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 500 });
    await cache.getOrCompute('k', async () => 'v1');
    clock.advance(1200);
    const seen = { calls: 0, signal: undefined as AbortSignal | undefined };
    const refresh = ({ signal }: { signal: AbortSignal }) => {
      seen.calls++;
      seen.signal = signal;
      return answer();
    };
    return { clock, cache, refresh, seen };
  }

  it('a caller abort within grace leaves the background refresh running (the callers answered stale never joined it)', async () => {
    const gate = deferred<string>();
    const { cache, refresh, seen } = await staleKey(() => gate.promise);
    const controller = new AbortController();
    expect(await cache.getOrCompute('k', refresh, { signal: controller.signal })).toBe('v1');
    controller.abort();
    await flush();
    expect(seen.signal!.aborted).toBe(false);
    gate.resolve('v2');
    await flush();
    expect(await cache.getOrCompute('k', refresh)).toBe('v2');
  });

  it("past grace a background refresh is the key's fill: when every caller waiting on it left, it is abandoned and the next load fills anew", async () => {
    const { clock, cache, refresh: hung, seen } = await staleKey(() => new Promise<string>(() => {})); // never answers
    expect(await cache.getOrCompute('k', hung)).toBe('v1');
    await flush();
    clock.advance(1000); // past grace: the next caller joins the running refresh
    const controller = new AbortController();
    const joined = cache.getOrCompute('k', hung, { signal: controller.signal }).catch(() => 'aborted');
    controller.abort();
    expect(await joined).toBe('aborted');
    expect(seen.signal!.aborted).toBe(true); // as an ordinary fill's, once its last caller left
    let fills = 0;
    expect(await cache.getOrCompute('k', async () => `v${++fills + 1}`)).toBe('v2');
    expect(fills).toBe(1);
    expect(cache.inFlight).toBe(0);
  });

  it("within grace a caller that joins the refresh (coalesce-only, ttl: 0) and leaves does not abandon it: the stale value's readers count on it", async () => {
    const gate = deferred<string>();
    const { cache, refresh, seen } = await staleKey(() => gate.promise);
    expect(await cache.getOrCompute('k', refresh)).toBe('v1');
    await flush();
    const controller = new AbortController();
    const joined = cache.getOrCompute('k', refresh, { ttl: 0, signal: controller.signal }).catch(() => 'aborted');
    controller.abort();
    expect(await joined).toBe('aborted');
    expect(seen.signal!.aborted).toBe(false);
    expect(cache.inFlight).toBe(1);
    expect(await cache.getOrCompute('k', refresh)).toBe('v1'); // stale again: no second refresh
    expect(seen.calls).toBe(1);
    gate.resolve('v2');
    await flush();
    expect(await cache.getOrCompute('k', refresh)).toBe('v2');
  });

  it('a refresh that never ends lets go of its maxRefreshes slot once the entry it replaces can no longer be served', async () => {
    const clock = manualClock();
    const cache = createCache({ clock, ttl: 1000, swr: 500, maxRefreshes: 1 });
    await cache.getOrCompute('a', async () => 'a1');
    clock.advance(500);
    await cache.getOrCompute('b', async () => 'b1');
    clock.advance(600); // a stale (grace until 1500), b fresh
    expect(await cache.getOrCompute('a', () => new Promise<string>(() => {}))).toBe('a1'); // its refresh hangs
    clock.advance(500); // b stale (grace until 2000); a past its grace
    let refreshed = 0;
    expect(
      await cache.getOrCompute('b', async () => {
        refreshed++;
        return 'b2';
      }),
    ).toBe('b1');
    await flush();
    expect(refreshed).toBe(1); // not dropped: a's refresh no longer holds the only slot
    expect(cache.metrics().total).toMatchObject({ refreshes: 2, refreshesDropped: 0 });
    expect(await cache.getOrCompute('b', async () => 'b3')).toBe('b2');
  });
});

describe('negative caching', () => {
  it('null is a value and is cached; undefined is returned but not cached', async () => {
    const cache = createCache({ ttl: Infinity });
    const nullFill = jest.fn(async () => null);
    expect(await cache.getOrCompute('missing', nullFill)).toBeNull();
    expect(await cache.getOrCompute('missing', nullFill)).toBeNull();
    expect(nullFill).toHaveBeenCalledTimes(1);
    const undefinedFill = jest.fn(async () => undefined);
    expect(await cache.getOrCompute('nothing', undefinedFill)).toBeUndefined();
    expect(await cache.getOrCompute('nothing', undefinedFill)).toBeUndefined();
    expect(undefinedFill).toHaveBeenCalledTimes(2);
  });
});

describe('invalidation', () => {
  it('invalidate(key) removes the entry', async () => {
    const cache = createCache({ ttl: Infinity });
    await cache.getOrCompute('k', async () => 'old');
    await cache.invalidate('k');
    expect(await cache.getOrCompute('k', async () => 'new')).toBe('new');
    expect(cache.metrics().total.invalidations).toBe(1);
  });

  it('a fill that started before the invalidate does not write its result afterwards', async () => {
    const store = memoryStore();
    const cache = createCache({ ttl: Infinity, store });
    const gate = deferred<string>();
    let calls = 0;
    const fill = () => (++calls === 1 ? gate.promise : Promise.resolve('after'));
    const before = cache.getOrCompute('k', fill);
    await flush();
    await cache.invalidate('k');
    const after = cache.getOrCompute('k', fill);
    gate.resolve('stale, computed before the invalidate');
    // The waiter of the old fill re-contended and got the new value.
    expect(await before).toBe('after');
    expect(await after).toBe('after');
    await flush();
    expect(store.getSync('k')!.value).toBe('after');
  });
});

describe('metrics and hooks', () => {
  it('counts per source and in total, and calls the observer hooks', async () => {
    const events: string[] = [];
    const cache = createCache({
      ttl: Infinity,
      hooks: {
        onHit: (key, source) => events.push(`hit ${key} ${source}`),
        onMiss: (key) => events.push(`miss ${key}`),
        onCoalesced: (key) => events.push(`coalesced ${key}`),
        onFill: (key, source, ms, error) =>
          events.push(`fill ${key} ${source} ${typeof ms} ${error === undefined ? 'ok' : 'failed'}`),
      },
    });
    const users = cache.loader<number, string>({ name: 'user', batch: async (ids) => ids.map((id) => `u${id}`) });
    await Promise.all([cache.getOrCompute('k', async () => 1), cache.getOrCompute('k', async () => 2)]);
    await cache.getOrCompute('k', async () => 3);
    await users.loadMany([1, 2]);
    const snapshot = cache.metrics();
    expect(snapshot.sources.getOrCompute).toMatchObject({ hits: 1, misses: 1, coalesced: 1, fills: 1 });
    expect(snapshot.sources.user).toMatchObject({ misses: 2, fills: 2, batches: 1, batchedKeys: 2 });
    expect(snapshot.total).toMatchObject({ hits: 1, misses: 3, coalesced: 1, fills: 3, batches: 1 });
    expect(events).toEqual(
      expect.arrayContaining([
        'miss k',
        'coalesced k',
        'hit k getOrCompute',
        'fill k getOrCompute number ok',
        'fill user:1 user number ok',
      ]),
    );
  });

  it('a throwing hook does not fail the load', async () => {
    const cache = createCache({
      ttl: Infinity,
      hooks: {
        onMiss: () => {
          throw new Error('observer bug');
        },
      },
    });
    expect(await cache.getOrCompute('k', async () => 'fine')).toBe('fine');
  });

  it('the snapshot is a copy', async () => {
    const cache = createCache({ ttl: Infinity });
    const before = cache.metrics();
    await cache.getOrCompute('k', async () => 1);
    expect(before.total.misses).toBe(0);
  });
});

describe('bad input', () => {
  const cache = createCache({ ttl: Infinity });
  it.each([[''], [42], [null], [undefined], [{}]])(
    'rejects key %p with E_INVALID_KEY naming the argument',
    async (key) => {
      await expect(cache.getOrCompute(key as unknown as string, async () => 1)).rejects.toMatchObject({
        code: 'E_INVALID_KEY',
        message: expect.stringContaining('argument "key"'),
      });
    },
  );

  it('rejects a fill that is not a function', async () => {
    await expect(cache.getOrCompute('k', 'nope' as never)).rejects.toMatchObject({
      code: 'E_INVALID_ARGUMENT',
      message: expect.stringContaining('argument "fill" must be a function, got "nope"'),
    });
  });

  it.each([
    ['ttl', NaN, /option "ttl" .* got NaN/],
    ['ttl', -5, /option "ttl" .* got -5/],
    ['ttl', '10', /option "ttl" .* got "10"/],
    ['ttl', -Infinity, /option "ttl" must be a number of milliseconds >= 0.*, got -Infinity/],
    ['swr', -1, /option "swr" .* got -1/],
    ['lockTtl', NaN, /option "lockTtl"/],
    ['maxRefreshes', 0, /option "maxRefreshes" must be a positive integer, got 0/],
    ['clock', {}, /option "clock"/],
    ['store', {}, /option "store"/],
  ])('createCache rejects %s = %p at configuration time', (name, value, message) => {
    expect(() => createCache({ ttl: Infinity, [name]: value } as never)).toThrow(message);
    expect(() => createCache({ ttl: Infinity, [name]: value } as never)).toThrow(HerdcacheError);
  });

  it('rejects bad per-call options without touching the cache', async () => {
    const c = createCache({ ttl: Infinity });
    await c.getOrCompute('k', async () => 'kept');
    await expect(c.getOrCompute('other', async () => 1, { ttl: NaN })).rejects.toMatchObject({
      code: 'E_INVALID_OPTION',
    });
    expect(await c.getOrCompute('k', async () => 'replaced')).toBe('kept');
    expect(c.inFlight).toBe(0);
  });
});

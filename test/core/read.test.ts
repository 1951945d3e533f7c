/**
 * The synchronous hit path (loader.read, scopedLoader.read) and the cost of joining a flight:
 * counted in fills, promises and stats, never in time.
 */
import { createCache, manualClock } from '../../src/core';
import { deferred, flush } from '../helpers';

function setup() {
  const clock = manualClock();
  const cache = createCache({ clock });
  let version = 1;
  let batches = 0;
  const users = cache.loader<string, { id: string; v: number }>({
    name: 'user',
    ttl: 1000,
    swr: 60_000,
    batch: async (ids) => {
      batches++;
      return ids.map((id) => ({ id, v: version }));
    },
  });
  return { cache, clock, users, bump: () => version++, batches: () => batches };
}

describe('read(): the value itself on an in-process hit', () => {
  it('loader.read returns a promise on a miss, then the value itself, counted as hits', async () => {
    const { cache, users } = setup();
    const first = users.read('1');
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toEqual({ id: '1', v: 1 });
    const again = users.read('1');
    expect(again).not.toBeInstanceOf(Promise);
    expect(again).toEqual({ id: '1', v: 1 });
    expect(cache.metrics().sources.user).toMatchObject({ misses: 1, hits: 1, fills: 1 });
  });

  it('a stale value within grace is served at once and refreshed once', async () => {
    const { cache, clock, users, bump, batches } = setup();
    await users.load('1');
    clock.advance(2000);
    bump();
    expect(users.read('1')).toEqual({ id: '1', v: 1 });
    await flush();
    expect(batches()).toBe(2);
    expect(users.read('1')).toEqual({ id: '1', v: 2 });
    expect(cache.metrics().sources.user).toMatchObject({ staleServed: 1, hits: 1, refreshes: 1 });
  });

  it('scopedLoader.read: the value on a hit, counted for the request; the same answer for the rest of the request', async () => {
    const { cache, clock, users, bump } = setup();
    await users.load('1');
    const request = cache.request();
    const scoped = request.loader(users);
    const first = scoped.read('1');
    expect(first).toEqual({ id: '1', v: 1 });
    expect(request.stats().sources.user).toMatchObject({ hits: 1 });
    // The shared entry moves on; this request keeps its answer, still synchronously, uncounted.
    clock.advance(2000);
    bump();
    await users.load('1');
    await flush();
    expect(await users.load('1')).toEqual({ id: '1', v: 2 });
    expect(scoped.read('1')).toBe(first);
    expect(await scoped.load('1')).toBe(first);
    expect(request.stats().sources.user).toMatchObject({ hits: 1, staleServed: 0 });
  });

  it('scopedLoader.read on a miss returns a promise of the request-memoized load that load() answers too', async () => {
    const { cache, users } = setup();
    const scoped = cache.request().loader(users);
    const pending = scoped.read('7');
    expect(pending).toBeInstanceOf(Promise);
    const loaded = scoped.load('7'); // a memo hit: a new promise resolving with the batch (DataLoader >= 2.1)
    expect(await pending).toEqual({ id: '7', v: 1 });
    expect(await loaded).toBe(await pending);
    expect(cache.metrics().sources.user).toMatchObject({ misses: 1, batches: 1 });
  });

  it("scopedLoader.read of a load whose first caller had a signal joins it: that caller leaving does not end read's wait", async () => {
    const { cache, users, batches } = setup();
    const scoped = cache.request().loader(users);
    const leaving = new AbortController();
    const first = scoped.load('8', { signal: leaving.signal });
    const read = scoped.read('8'); // no signal: it wants the value to the end
    expect(read).toBeInstanceOf(Promise);
    leaving.abort(new Error('left'));
    await expect(first).rejects.toThrow('left');
    await expect(read).resolves.toEqual({ id: '8', v: 1 });
    expect(batches()).toBe(1);
  });

  it('scopedLoader.read in a request that was aborted rejects with its reason, as load() does', async () => {
    const { cache, users } = setup();
    await users.load('9');
    const request = new AbortController();
    const scoped = cache.request({ signal: request.signal }).loader(users);
    expect(scoped.read('9')).toEqual({ id: '9', v: 1 });
    request.abort(new Error('request over'));
    await expect(scoped.load('9')).rejects.toThrow('request over');
    await expect(scoped.read('9')).rejects.toThrow('request over');
  });

  it('a prime answers read() synchronously', () => {
    const { cache, users } = setup();
    const scoped = cache.request().loader(users).prime('5', { id: '5', v: 50 });
    expect(scoped.read('5')).toEqual({ id: '5', v: 50 });
  });
});

describe('joining a flight', () => {
  it('every caller without a signal shares one promise; one fill', async () => {
    const cache = createCache();
    const gate = deferred<string>();
    let fills = 0;
    const fill = () => {
      fills++;
      return gate.promise;
    };
    const first = cache.getOrCompute('k', fill);
    const joined = Array.from({ length: 100 }, () => cache.getOrCompute('k', fill));
    expect(joined.every((p) => p === first)).toBe(true);
    await flush();
    gate.resolve('v');
    expect(await Promise.all(joined)).toEqual(joined.map(() => 'v'));
    expect(fills).toBe(1);
    expect(cache.metrics().total).toMatchObject({ misses: 1, coalesced: 100, fills: 1 });
  });

  it('an abandoned flight re-contends once for all its callers without a signal', async () => {
    const cache = createCache();
    const gates = [deferred<string>(), deferred<string>()];
    let fills = 0;
    const fill = () => gates[fills++]!.promise;
    const callers = Array.from({ length: 50 }, () => cache.getOrCompute('k', fill));
    await flush();
    await cache.invalidate('k'); // abandons the first fill: its callers start over
    await flush();
    gates[0]!.resolve('old');
    gates[1]!.resolve('new');
    expect(new Set(await Promise.all(callers))).toEqual(new Set(['new']));
    expect(fills).toBe(2);
    expect(cache.metrics().total).toMatchObject({ misses: 1, coalesced: 49, fills: 2 });
  });

  it('a burst of requests loading through scopes schedules one batch window, not one per request', async () => {
    const cache = createCache({ ttl: 60_000 });
    let batches = 0;
    const items = cache.loader<string, string>({
      name: 'item',
      batch: async (ids) => {
        batches++;
        return ids.map((id) => `v${id}`);
      },
    });
    const nextTick = jest.spyOn(process, 'nextTick');
    try {
      const loads = Array.from({ length: 1000 }, (_, i) =>
        cache
          .request()
          .loader(items)
          .load(String(i % 10)),
      );
      for (let i = 0; i < 3; i++) await Promise.resolve(); // the promise jobs that schedule the ticks
      expect(nextTick.mock.calls.length).toBeLessThanOrEqual(3); // the registry's dispatch and the scopes' one window
      expect(await Promise.all(loads)).toEqual(loads.map((_, i) => `v${i % 10}`));
    } finally {
      nextTick.mockRestore();
    }
    expect(batches).toBe(1);
  });

  it('request scopes forget a whole-batch failure when they next look (no handler per load)', async () => {
    const cache = createCache();
    let fail = true;
    const loader = cache.loader<number, number>({
      name: 'n',
      batch: async (ids) => {
        if (fail) throw new Error('down');
        return ids;
      },
    });
    const scoped = cache.request().loader(loader);
    await expect(scoped.load(1)).rejects.toThrow('down');
    fail = false;
    expect(await scoped.load(1)).toBe(1);
    expect(scoped.read(1)).toBe(1);
  });
});

test('loader.read() refuses a key it cannot load the way load() does: a TypeError thrown at once', () => {
  const cache = createCache({ ttl: 60_000 });
  const users = cache.loader<string, string>({ name: 'read-bad-key', batch: (keys) => keys.map((k) => k) });
  expect(() => users.load(undefined as unknown as string)).toThrow(TypeError);
  expect(() => users.read(undefined as unknown as string)).toThrow(TypeError);
});

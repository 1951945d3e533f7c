import { createCache, manualClock } from '../../src/core';
import { herdcacheContext } from '../../src/graphql';
import { deferred, flush } from '../helpers';

describe('request scope: DataLoader semantics per operation', () => {
  function setup() {
    const clock = manualClock();
    const cache = createCache({ ttl: Infinity, clock });
    let version = 1;
    const batches: string[][] = [];
    const users = cache.loader<string, { id: string; v: number }>({
      name: 'user',
      ttl: 1000,
      swr: 60_000,
      batch: async (ids) => {
        batches.push([...ids]);
        return ids.map((id) => (id === 'bad' ? new Error(`no user ${id}`) : { id, v: version }));
      },
    });
    return { cache, clock, users, batches, bump: () => version++ };
  }

  it('the same key within a request reaches the batch once and gives the same value (a repeat waits with the batch, as DataLoader >= 2.1)', async () => {
    const { cache, users, batches } = setup();
    const scope = cache.request().loader(users);
    const a = scope.load('1');
    const again = scope.load('1');
    expect(again).not.toBe(a); // DataLoader >= 2.1 also answers a cache hit with a new promise
    expect(await again).toBe(await a);
    expect(await scope.load('1')).toBe(await a);
    expect(batches).toEqual([['1']]);
    // Another request has its own memo: its load goes to the registry (and joins the fill in
    // flight, if one is).
    const otherRequest = cache.request();
    const b = otherRequest.loader(users).load('2');
    const c = scope.load('2');
    await expect(b).resolves.toBe(await c);
    expect(otherRequest.stats().sources.user?.misses).toBe(1);
    expect(batches).toEqual([['1'], ['2']]);
  });

  it('the same key gives the same answer within a request even if the shared entry is refreshed mid-request', async () => {
    const { cache, clock, users, bump } = setup();
    const scope = cache.request();
    const first = await scope.load(users, '1');
    clock.advance(2000); // stale: the next shared read refreshes it
    bump();
    await users.load('1'); // another request triggers the refresh
    await flush();
    expect(await users.load('1')).toEqual({ id: '1', v: 2 });
    expect(await scope.load(users, '1')).toBe(first);
    expect(first.v).toBe(1);
  });

  it('loadMany returns values and Errors in order, like DataLoader', async () => {
    const { cache, users } = setup();
    const results = await cache.request().loader(users).loadMany(['1', 'bad', '2']);
    expect(results[0]).toEqual({ id: '1', v: 1 });
    expect(results[1]).toBeInstanceOf(Error);
    expect(results[2]).toEqual({ id: '2', v: 1 });
  });

  it('prime keeps an existing entry, fills an empty one, and primes Errors as rejections', async () => {
    const { cache, users, batches } = setup();
    const scope = cache.request().loader(users);
    const loaded = await scope.load('1');
    scope.prime('1', { id: '1', v: 99 });
    expect(await scope.load('1')).toBe(loaded);
    scope.prime('2', { id: '2', v: 42 });
    expect(await scope.load('2')).toEqual({ id: '2', v: 42 });
    scope.prime('3', new Error('primed failure'));
    await expect(scope.load('3')).rejects.toThrow('primed failure');
    expect(batches).toEqual([['1']]);
    // prime is request-local: the shared loader never saw 2.
    expect(await users.load('2')).toEqual({ id: '2', v: 1 });
  });

  it('clear and clearAll forget the request memo only', async () => {
    const { cache, users, bump } = setup();
    const request = cache.request();
    const scope = request.loader(users);
    const a = scope.load('1');
    await a;
    expect(scope.clear('1').load('1')).not.toBe(a);
    expect(request.stats().sources.user?.hits).toBe(1); // asked the registry again
    const first = scope.load('2');
    scope.clearAll();
    const again = scope.load('2');
    await Promise.all([first, again]);
    // Asked again, joined its own fill (counted once the flight's read found nothing: a fill ran).
    expect(request.stats().sources.user?.coalesced).toBe(1);
    bump();
    // The shared entry is untouched by a scope's clear: still the first value.
    expect((await scope.load('1')).v).toBe(1);
  });

  it('a per-key Error stays memoized for the request; a whole-batch failure is forgotten', async () => {
    const cache = createCache({ ttl: Infinity });
    let mode: 'key' | 'batch' | 'ok' = 'key';
    const loader = cache.loader<number, number>({
      name: 'n',
      batch: async (ids) => {
        if (mode === 'batch') throw new Error('batch down');
        return ids.map((id) => (mode === 'key' ? new Error(`key ${id} failed`) : id));
      },
    });
    const scope = cache.request().loader(loader);
    await expect(scope.load(1)).rejects.toThrow('key 1 failed');
    mode = 'ok';
    await expect(scope.load(1)).rejects.toThrow('key 1 failed'); // memoized, as DataLoader
    mode = 'batch';
    await expect(scope.load(2)).rejects.toThrow('batch down');
    mode = 'ok';
    await flush();
    expect(await scope.load(2)).toBe(2); // forgotten: retried
  });

  it('getOrCompute on a scope is memoized and attributed to the request', async () => {
    const cache = createCache({ ttl: Infinity });
    const scope = cache.request();
    const fill = jest.fn(async () => 'v');
    const a = scope.getOrCompute('k', fill, { label: 'Query.thing' });
    expect(scope.getOrCompute('k', fill)).toBe(a);
    await a;
    const other = cache.request();
    await other.getOrCompute('k', fill, { label: 'Query.thing' });
    expect(fill).toHaveBeenCalledTimes(1);
    expect(scope.stats().sources['Query.thing']).toMatchObject({ misses: 1, fills: 1, hits: 0 });
    expect(other.stats().sources['Query.thing']).toMatchObject({ hits: 1, misses: 0, fills: 0 });
    expect(cache.metrics().sources['Query.thing']).toMatchObject({ hits: 1, misses: 1 });
  });

  it('stats count each load of the request once: hits + misses + coalesced + stale = loads', async () => {
    const { cache, users } = setup();
    await users.load('warm');
    const a = cache.request();
    const b = cache.request();
    await Promise.all([a.loader(users).loadMany(['warm', 'x', 'y']), b.loader(users).loadMany(['x', 'y', 'z'])]);
    const sa = a.stats().total;
    const sb = b.stats().total;
    expect(sa.hits + sa.misses + sa.coalesced + sa.staleServed).toBe(3);
    expect(sb.hits + sb.misses + sb.coalesced + sb.staleServed).toBe(3);
    expect(sa).toMatchObject({ hits: 1, misses: 2 });
    expect(sb).toMatchObject({ coalesced: 2, misses: 1 });
  });
});

describe('request scope: joins counted by their flight', () => {
  it('hundreds of joins in one request, some flights decided and some not when it reads its stats: each counted once, by its outcome', async () => {
    const cache = createCache({ ttl: Infinity });
    let release: (() => void) | undefined;
    const held = cache.loader<string, string>({
      name: 'held',
      batch: async (ids) => ids.map((id) => `held ${id}`),
      // Its batch leaves only when the test says: its flights stay undecided meanwhile.
      batchScheduleFn: (dispatch) => void (release = dispatch),
    });
    const quick = cache.loader<string, string>({ name: 'quick', batch: async (ids) => ids.map((id) => `quick ${id}`) });
    const starter = cache.request();
    const scope = cache.request();
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
    const first = keys.flatMap((k) => [starter.load(quick, k), starter.load(held, k)]);
    // 200 joins of undecided flights in one request: its list of them grows past the sizes where it is compacted.
    const joined = keys.flatMap((k) => [scope.load(quick, k), scope.load(held, k)]);
    expect(scope.stats().total).toMatchObject({ hits: 0, misses: 0, coalesced: 0 });
    await Promise.all(first.filter((_, i) => i % 2 === 0));
    expect(scope.stats().sources.quick).toMatchObject({ coalesced: 100, misses: 0 });
    expect(scope.stats().sources.held).toBeUndefined();
    // 100 more joins: the list is compacted again while the held flights are still undecided.
    const later = keys.map((k) => `later ${k}`);
    const second = later.map((k) => starter.load(quick, k));
    const joinedLater = later.map((k) => scope.load(quick, k));
    expect(scope.stats().sources.quick).toMatchObject({ coalesced: 100 });
    release!();
    await Promise.all([...first, ...second, ...joined, ...joinedLater]);
    const stats = scope.stats();
    expect(stats.sources.quick).toMatchObject({ coalesced: 200, misses: 0, hits: 0 });
    expect(stats.sources.held).toMatchObject({ coalesced: 100, misses: 0, hits: 0 });
    expect(stats.total.coalesced).toBe(300);
    // Read again: nothing counted twice.
    expect(scope.stats().total.coalesced).toBe(300);
    expect(starter.stats().total).toMatchObject({ misses: 300, coalesced: 0 });
    expect(cache.metrics().sources.quick).toMatchObject({ misses: 200, coalesced: 200 });
    expect(cache.metrics().sources.held).toMatchObject({ misses: 100, coalesced: 100 });
  });
});

describe("a scoped loader's first load of a key: its caller holds the memo's promise", () => {
  function setup(batch: (ids: readonly string[], call: number) => Promise<(string | Error)[]>) {
    const cache = createCache({ ttl: 60_000 });
    let calls = 0;
    const users = cache.loader<string, string>({ name: 'user', batch: (ids) => batch(ids, ++calls) });
    return { cache, users, calls: () => calls };
  }

  it('abandoned mid-fill, it answers with the next fill, and the request then reads that value synchronously', async () => {
    const first = deferred<(string | Error)[]>();
    const { cache, users, calls } = setup((ids, call) =>
      call === 1 ? first.promise : Promise.resolve(ids.map((id) => `${id}@${call}`)),
    );
    const scope = cache.request().loader(users);
    const load = scope.load('1');
    await flush();
    await users.clear('1'); // abandons the fill in flight: the load re-contends
    first.resolve(['1@1']);
    await expect(load).resolves.toBe('1@2');
    expect(scope.read('1')).toBe('1@2'); // the memo knows how its promise ended, without a handler of its own
    expect(calls()).toBe(2);
  });

  it('abandoned, then failing as a whole batch, it rejects and the request forgets it', async () => {
    const first = deferred<(string | Error)[]>();
    const { cache, users, calls } = setup((ids, call) => {
      if (call === 1) return first.promise;
      if (call === 2) return Promise.reject(new Error('down'));
      return Promise.resolve(ids.map((id) => `${id}@${call}`));
    });
    const scope = cache.request().loader(users);
    const load = scope.load('1');
    await flush();
    await users.clear('1');
    first.resolve(['1@1']);
    await expect(load).rejects.toThrow('down');
    await expect(scope.load('1')).resolves.toBe('1@3'); // forgotten: loaded again
    expect(calls()).toBe(3);
  });

  it('a whole-batch failure is forgotten, a per-key Error kept, as DataLoader', async () => {
    const { cache, users, calls } = setup((ids, call) =>
      call === 1 ? Promise.reject(new Error('down')) : Promise.resolve(ids.map((id) => new Error(`no ${id}@${call}`))),
    );
    const scope = cache.request().loader(users);
    await expect(scope.load('1')).rejects.toThrow('down');
    await expect(scope.load('1')).rejects.toThrow('no 1@2'); // forgotten: the batch ran again
    await expect(scope.load('1')).rejects.toThrow('no 1@2'); // kept: no third batch
    expect(calls()).toBe(2);
  });
});

describe('scope.loader refuses what is not a loader of its cache, at once', () => {
  const batch = (keys: readonly string[]): string[] => keys.map((k) => k.toUpperCase());

  it.each([null, undefined, {}, 5, 'u'])(
    '%p: E_INVALID_ARGUMENT naming "loader" (a TypeError at load time before)',
    (bad) => {
      const cache = createCache();
      const scope = cache.request();
      const refused = (): void => {
        for (const attempt of [() => scope.loader(bad as never), () => scope.loader(bad as never, { cache: false })]) {
          expect(attempt).toThrow(expect.objectContaining({ code: 'E_INVALID_ARGUMENT' }));
          expect(attempt).toThrow(/argument "loader" must be a loader made by cache\.loader/);
        }
      };
      refused();
      // Also once the scope has a first view, and an answer held under the string 'u'.
      scope.loader(cache.loader({ name: 'users', batch }));
      void scope.getOrCompute('u', () => 1);
      refused();
    },
  );

  it("another cache's loader is taken: its loads go through its own cache, memoized for the request", async () => {
    const cache = createCache({ ttl: 1000 });
    const other = createCache({ ttl: 1000 });
    const foreign = other.loader({ name: 'users', batch });
    const scope = cache.request();
    await expect(scope.loader(foreign).load('a')).resolves.toBe('A');
    await expect(scope.load(foreign, 'a')).resolves.toBe('A');
    expect(other.metrics().sources.users?.fills).toBe(1);
    const context = herdcacheContext({ cache, loaders: { users: foreign } });
    await expect(context.loaders.users.load('b')).resolves.toBe('B');
    expect(other.metrics().sources.users?.fills).toBe(2);
  });
});

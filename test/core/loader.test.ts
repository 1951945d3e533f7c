import { HerdcacheError, createCache, manualClock, memoryStore } from '../../src/core';
import { asyncStore, deferred, flush } from '../helpers';

function recordingBatch<V>(compute: (key: number) => V | Error) {
  const calls: number[][] = [];
  const batch = async (keys: readonly number[]) => {
    calls.push([...keys]);
    return keys.map(compute);
  };
  return { calls, batch };
}

describe('batching loader', () => {
  it('keys requested by all concurrent requests in one tick go to one batch call', async () => {
    const cache = createCache({ ttl: Infinity });
    const { calls, batch } = recordingBatch((id) => `user ${id}`);
    const users = cache.loader({ name: 'user', batch });
    const requests = [cache.request(), cache.request(), cache.request()];
    const results = await Promise.all([
      requests[0]!.load(users, 1),
      requests[1]!.load(users, 2),
      requests[2]!.loader(users).loadMany([3, 1]),
      users.load(4),
    ]);
    expect(results).toEqual(['user 1', 'user 2', ['user 3', 'user 1'], 'user 4']);
    expect(calls).toEqual([[1, 2, 3, 4]]);
  });

  it('leaves out keys already cached (answered from the store) and keys in flight (they join the flight)', async () => {
    const cache = createCache({ ttl: Infinity });
    const gate = deferred<void>();
    const calls: number[][] = [];
    const users = cache.loader<number, string>({
      name: 'user',
      batch: async (ids) => {
        calls.push([...ids]);
        await gate.promise;
        return ids.map((id) => `u${id}`);
      },
    });
    await users.prime(1, 'cached u1');
    const first = users.loadMany([2, 3]);
    await flush();
    expect(calls).toEqual([[2, 3]]);
    // 1 is cached, 2 and 3 are in flight: only 4 is batched.
    const second = users.loadMany([1, 2, 3, 4]);
    await flush();
    expect(calls).toEqual([[2, 3], [4]]);
    gate.resolve();
    expect(await second).toEqual(['cached u1', 'u2', 'u3', 'u4']);
    expect(await first).toEqual(['u2', 'u3']);
    const { sources } = cache.metrics();
    expect(sources.user).toMatchObject({ hits: 1, coalesced: 2, misses: 3, batches: 2, batchedKeys: 3 });
  });

  it('maxBatchSize splits large batches', async () => {
    const cache = createCache({ ttl: Infinity });
    const { calls, batch } = recordingBatch((id) => id * 10);
    const numbers = cache.loader({ name: 'n', batch, maxBatchSize: 3 });
    const values = await numbers.loadMany([1, 2, 3, 4, 5, 6, 7]);
    expect(values).toEqual([10, 20, 30, 40, 50, 60, 70]);
    expect(calls).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
  });

  it('a per-key Error fails that key only and is not cached', async () => {
    const cache = createCache({ ttl: Infinity });
    let failSeven = true;
    const { calls, batch } = recordingBatch((id) => (id === 7 && failSeven ? new Error(`no ${id}`) : id));
    const loader = cache.loader({ name: 'n', batch });
    const results = await loader.loadMany([6, 7, 8]);
    expect(results[0]).toBe(6);
    expect(results[1]).toBeInstanceOf(Error);
    expect((results[1] as Error).message).toBe('no 7');
    expect(results[2]).toBe(8);
    await expect(loader.load(7)).rejects.toThrow('no 7');
    failSeven = false;
    expect(await loader.load(7)).toBe(7);
    expect(await loader.loadMany([6, 8])).toEqual([6, 8]);
    expect(calls).toEqual([[6, 7, 8], [7], [7]]);
  });

  it.each([
    ['a non-array', async () => ({ not: 'an array' }), 'E_BATCH_NOT_ARRAY', /must return an array/],
    [
      'the wrong length',
      async (keys: readonly number[]) => keys.slice(1),
      'E_BATCH_LENGTH',
      /returned 2 values for 3 keys/,
    ],
  ])(
    'a batch returning %s fails every key of that batch with a clear error; nothing is cached',
    async (_label, bad, code, message) => {
      const cache = createCache({ ttl: Infinity });
      let broken = true;
      const loader = cache.loader<number, number>({
        name: 'n',
        batch: async (keys) => (broken ? ((await bad(keys)) as unknown as number[]) : keys.map((k) => k)),
      });
      const results = await loader.loadMany([1, 2, 3]);
      for (const r of results) {
        expect(r).toBeInstanceOf(HerdcacheError);
        expect(r).toMatchObject({ code, message: expect.stringMatching(message) });
      }
      expect(results[0]).toBe(results[1]); // one error object, shared
      broken = false;
      expect(await loader.loadMany([1, 2, 3])).toEqual([1, 2, 3]);
    },
  );

  it('a batch that throws fails every key with its own error object', async () => {
    const cache = createCache({ ttl: Infinity });
    const error = new Error('db down');
    const loader = cache.loader<number, number>({
      name: 'n',
      batch: async () => {
        throw error;
      },
    });
    const results = await loader.loadMany([1, 2]);
    expect(results).toEqual([error, error]);
    expect(results[0]).toBe(error);
    expect(cache.metrics().sources.n).toMatchObject({ fillFailures: 2, batches: 1 });
    expect(cache.inFlight).toBe(0);
  });

  it('the batch signal fires only when every key of the batch was abandoned', async () => {
    const cache = createCache({ ttl: Infinity });
    let signal: AbortSignal | undefined;
    const loader = cache.loader<number, number>({
      name: 'n',
      batch: (keys, context) => {
        signal = context.signal;
        return new Promise(() => {});
      },
    });
    const c1 = new AbortController();
    const c2 = new AbortController();
    const p1 = loader.load(1, { signal: c1.signal }).catch(() => 'aborted');
    const p2 = loader.load(2, { signal: c2.signal }).catch(() => 'aborted');
    await flush();
    c1.abort();
    expect(await p1).toBe('aborted');
    expect(signal!.aborted).toBe(false);
    c2.abort();
    expect(await p2).toBe('aborted');
    expect(signal!.aborted).toBe(true);
  });

  it('prime writes the shared store; clear invalidates it and abandons a fill in flight', async () => {
    const store = memoryStore();
    const cache = createCache({ ttl: Infinity, store });
    const batch = jest.fn(async (ids: readonly number[]) => ids.map((id) => `db ${id}`));
    const users = cache.loader({ name: 'user', batch });
    await users.prime(1, 'primed');
    expect(await users.load(1)).toBe('primed');
    expect(store.getSync('user:1')!.value).toBe('primed');
    await users.clear(1);
    expect(store.getSync('user:1')).toBeUndefined();
    expect(await users.load(1)).toBe('db 1');
    expect(batch).toHaveBeenCalledTimes(1);
  });

  it('cache.invalidate takes the loader key as name:key', async () => {
    const cache = createCache({ ttl: Infinity });
    let version = 1;
    const users = cache.loader<number, string>({
      name: 'user',
      batch: async (ids) => ids.map((id) => `u${id} v${version}`),
    });
    expect(await users.load(1)).toBe('u1 v1');
    version = 2;
    await cache.invalidate(users.storeKey(1));
    expect(await users.load(1)).toBe('u1 v2');
  });

  it('a raw getOrCompute key "name:key" is the loader\'s entry (one key space, as the README warns)', async () => {
    const cache = createCache({ ttl: Infinity });
    const users = cache.loader<string, string>({ name: 'user', batch: async (ids) => ids.map((id) => `loader ${id}`) });
    expect(await cache.getOrCompute('user:42', () => 'raw')).toBe('raw');
    expect(await users.load('42')).toBe('raw');
  });

  it('null results are cached; undefined results are not', async () => {
    const cache = createCache({ ttl: Infinity });
    const { calls, batch } = recordingBatch((id) => (id === 1 ? null : undefined));
    const loader = cache.loader({ name: 'n', batch });
    expect(await loader.loadMany([1, 2])).toEqual([null, undefined]);
    expect(await loader.loadMany([1, 2])).toEqual([null, undefined]);
    expect(calls).toEqual([[1, 2], [2]]);
  });

  it('stale keys of one tick are refreshed in one background batch', async () => {
    const clock = manualClock();
    const cache = createCache({ ttl: Infinity, clock });
    let version = 1;
    const calls: number[][] = [];
    const loader = cache.loader<number, string>({
      name: 'n',
      ttl: 1000,
      swr: 10_000,
      batch: async (ids) => {
        calls.push([...ids]);
        return ids.map((id) => `${id}v${version}`);
      },
    });
    await loader.loadMany([1, 2, 3]);
    clock.advance(2000);
    version = 2;
    expect(await loader.loadMany([1, 2, 3])).toEqual(['1v1', '2v1', '3v1']);
    await flush();
    expect(calls).toEqual([
      [1, 2, 3],
      [1, 2, 3],
    ]);
    expect(await loader.loadMany([1, 2, 3])).toEqual(['1v2', '2v2', '3v2']);
  });

  it('works the same on an asynchronous store: one read for the tick, then one batch', async () => {
    const { store, calls: storeCalls } = asyncStore(memoryStore());
    const cache = createCache({ ttl: Infinity, store });
    const { calls, batch } = recordingBatch((id) => id);
    const loader = cache.loader({ name: 'n', batch });
    await loader.prime(2, 2);
    expect(await loader.loadMany([1, 2, 3])).toEqual([1, 2, 3]);
    expect(storeCalls.getMany).toBe(1);
    expect(calls).toEqual([[1, 3]]);
    expect(cache.metrics().sources.n).toMatchObject({ hits: 1, misses: 2 });
  });

  it('the misses of every loader and getOrCompute in one tick share one store read', async () => {
    const { store, calls } = asyncStore(memoryStore());
    const cache = createCache({ ttl: Infinity, store });
    const users = cache.loader<number, string>({ name: 'user', batch: async (ids) => ids.map((id) => `u${id}`) });
    const posts = cache.loader<number, string>({ name: 'post', batch: async (ids) => ids.map((id) => `p${id}`) });
    const results = await Promise.all([
      users.load(1),
      posts.load(1),
      users.load(2),
      cache.getOrCompute('x', async () => 'x'),
    ]);
    expect(results).toEqual(['u1', 'p1', 'u2', 'x']);
    expect(calls.getMany).toBe(1);
    expect(calls.getManyKeys[0]).toEqual(['user:1', 'post:1', 'user:2', 'x']);
  });

  describe('bad input', () => {
    const cache = createCache({ ttl: Infinity });
    it('rejects a missing or duplicate name, a non-function batch, a bad maxBatchSize', () => {
      expect(() => cache.loader({ name: '', batch: async () => [] })).toThrow(/option "name"/);
      expect(() => cache.loader({ name: 'x', batch: 'nope' as never })).toThrow(
        /option "batch" must be a function, got "nope"/,
      );
      expect(() => cache.loader({ name: 'y', batch: async () => [], maxBatchSize: 0 })).toThrow(
        /option "maxBatchSize" must be a positive integer or Infinity, got 0/,
      );
      expect(() => cache.loader({ name: 'z', batch: async () => [], ttl: -1 })).toThrow(/option "ttl"/);
      cache.loader({ name: 'dup', batch: async () => [] });
      expect(() => cache.loader({ name: 'dup', batch: async () => [] })).toThrow(
        expect.objectContaining({ code: 'E_DUPLICATE_LOADER' }),
      );
    });

    it('throws at once (a TypeError, as DataLoader) for keys that do not map to a non-empty string, naming the loader and key', async () => {
      const loader = cache.loader<unknown, unknown>({ name: 'keys', batch: async (ks) => ks });
      expect(() => loader.load({ id: 1 })).toThrow(
        expect.objectContaining({
          code: 'E_INVALID_KEY',
          message: expect.stringContaining('loader "keys" got key object'),
        }),
      );
      expect(() => loader.load('')).toThrow(expect.objectContaining({ code: 'E_INVALID_KEY' }));
      expect(() => loader.load(NaN)).toThrow(
        expect.objectContaining({ code: 'E_INVALID_KEY', message: expect.stringContaining('NaN') }),
      );
      expect(() => loader.load(undefined)).toThrow(TypeError);
      expect(() => loader.load(null)).toThrow(HerdcacheError);
      expect(() => loader.loadMany('1' as never)).toThrow(
        expect.objectContaining({
          code: 'E_INVALID_KEY',
          message: expect.stringContaining('loadMany() must be called with an array'),
        }),
      );
      const byId = cache.loader<{ id: number }, number>({
        name: 'byId',
        batch: async (ks) => ks.map((k) => k.id),
        key: (k) => String(k.id),
      });
      expect(await byId.load({ id: 5 })).toBe(5);
    });

    it('a missing key is refused naming the method that was given it', async () => {
      const loader = cache.loader<string | undefined, string>({ name: 'named', batch: async (ks) => ks.map(String) });
      const named = (method: string) =>
        expect.objectContaining({
          message: `herdcache: loader "named": ${method} must be called with a key, got undefined`,
        });
      expect(() => loader.load(undefined)).toThrow(named('load()'));
      expect(() => loader.storeKey(undefined)).toThrow(named('storeKey()'));
      expect(() => loader.read(undefined)).toThrow(named('read()'));
      await expect(loader.prime(undefined, 'x')).rejects.toEqual(named('prime()'));
      await expect(loader.clear(undefined)).rejects.toEqual(named('clear()'));
      await expect(loader.clearMany(['a', undefined])).rejects.toEqual(named('clearMany()'));
      const scoped = cache.request().loader(loader);
      expect(() => scoped.load(undefined)).toThrow(named('load()'));
      expect(() => scoped.read(undefined)).toThrow(named('read()'));
      expect(() => scoped.prime(undefined, 'x')).toThrow(named('prime()'));
      expect(() => scoped.clear(undefined)).toThrow(named('clear()'));
    });
  });
});

/**
 * DataLoader's documented behaviour (its README and API docs, v2.2), one test per behaviour,
 * run against the real `dataloader` and against herdcache's scoped loader through the adapter.
 * A divergence shows as a test passing on one and failing on the other; the differences herdcache
 * means to have are listed once, in intended-differences.ts, and run as `test.failing` there.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type BatchLoadFn, type Implementation, implementations } from './adapter';
import { INTENDED_DIFFERENCES } from './intended-differences';

/** Lets promise jobs, next ticks and both implementations' dispatches run. */
async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** A batch function that records each call's keys and answers `compute(key)` per key. */
function recording<K, V>(compute: (key: K) => V | Error = (key) => `v:${String(key)}` as V) {
  const calls: K[][] = [];
  const batch: BatchLoadFn<K, V> = async (keys) => {
    calls.push([...keys]);
    return keys.map(compute);
  };
  return { calls, batch };
}

/** DataLoader's README example of a manually dispatched scheduler. */
function manualScheduler() {
  let callbacks: (() => void)[] = [];
  return {
    schedule: (callback: () => void) => void callbacks.push(callback),
    dispatch: () => {
      const now = callbacks;
      callbacks = [];
      now.forEach((callback) => callback());
    },
  };
}

const behaviours = new Set<string>();

describe.each(implementations)('$name', (impl: Implementation) => {
  /** One documented behaviour; an intended difference is expected to fail on herdcache. */
  const behaviour = (name: string, fn: () => Promise<void> | void) => {
    behaviours.add(name);
    const differs = impl.name === 'herdcache' && Object.prototype.hasOwnProperty.call(INTENDED_DIFFERENCES, name);
    (differs ? test.failing : test)(name, fn as () => Promise<void>);
  };

  describe('batching', () => {
    behaviour('loads issued in one tick reach the batch function in one call, keys in load order', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch)();
      expect(await Promise.all([loader.load(3), loader.load(1), loader.load(2)])).toEqual(['v:3', 'v:1', 'v:2']);
      expect(calls).toEqual([[3, 1, 2]]);
    });

    behaviour('each load resolves with the value at its key index, null included', async () => {
      const loader = impl.perRequest<number, { id: number } | null>(async (ids) =>
        ids.map((id) => (id === 6 ? null : { id })),
      )();
      expect(await Promise.all([loader.load(2), loader.load(9), loader.load(6), loader.load(1)])).toEqual([
        { id: 2 },
        { id: 9 },
        null,
        { id: 1 },
      ]);
    });

    behaviour('a load resolves with the very object the batch function returned', async () => {
      const row = { id: 1 };
      const loader = impl.perRequest<number, { id: number }>(async (ids) => ids.map(() => row))();
      expect(await loader.load(1)).toBe(row);
    });

    behaviour('undefined from the batch function is a value', async () => {
      const { calls, batch } = recording<number, undefined>(() => undefined);
      const loader = impl.perRequest(batch)();
      expect(await loader.load(1)).toBeUndefined();
      expect(await loader.load(1)).toBeUndefined();
      expect(calls).toEqual([[1]]);
    });

    behaviour('loads that depend on earlier loads leave in the next batch: two chains, two batch calls', async () => {
      const { calls, batch } = recording<number, { invitedBy: number }>((id) => ({ invitedBy: id + 10 }));
      const users = impl.perRequest(batch)();
      const chain = async (id: number) => users.load((await users.load(id)).invitedBy);
      await Promise.all([chain(1), chain(2)]);
      expect(calls).toEqual([
        [1, 2],
        [11, 12],
      ]);
    });

    behaviour('the batch function is called with the loader as this', async () => {
      let self: unknown;
      const loader = impl.perRequest<number, number>(function (this: unknown, ids) {
        self = this; // eslint-disable-line @typescript-eslint/no-this-alias -- the receiver is what is checked
        return Promise.resolve(ids.map((id) => id));
      })();
      await loader.load(1);
      expect(self).toBe(loader);
    });

    behaviour('an Error at a key index rejects that load only, with that Error', async () => {
      const failure = new Error('no 2');
      const loader = impl.perRequest<number, number>(async (ids) => ids.map((id) => (id === 2 ? failure : id)))();
      const [one, two, three] = await Promise.allSettled([loader.load(1), loader.load(2), loader.load(3)]);
      expect(one).toEqual({ status: 'fulfilled', value: 1 });
      expect(two).toEqual({ status: 'rejected', reason: failure });
      expect(three).toEqual({ status: 'fulfilled', value: 3 });
    });

    behaviour('maxBatchSize limits the keys of one batch call', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch, { maxBatchSize: 2 })();
      await Promise.all([1, 2, 3, 4, 5].map((id) => loader.load(id)));
      expect(calls).toEqual([[1, 2], [3, 4], [5]]);
    });

    behaviour('batch: false calls the batch function with one key at a time', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch, { batch: false })();
      await Promise.all([loader.load(1), loader.load(2)]);
      expect(calls).toEqual([[1], [2]]);
    });

    behaviour('a result of the wrong length rejects every load of the batch', async () => {
      const loader = impl.perRequest<number, number>(async () => [1])();
      const results = await Promise.allSettled([loader.load(1), loader.load(2)]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(Error);
    });

    behaviour('a result that is not an array rejects every load of the batch', async () => {
      const loader = impl.perRequest<number, number>(async () => ({ 1: 1 }) as never)();
      const results = await Promise.allSettled([loader.load(1), loader.load(2)]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    });

    behaviour('a rejected batch rejects every load of it with that error', async () => {
      const down = new Error('backend down');
      const loader = impl.perRequest<number, number>(async () => Promise.reject(down))();
      const results = await Promise.allSettled([loader.load(1), loader.load(2)]);
      expect(results).toEqual([
        { status: 'rejected', reason: down },
        { status: 'rejected', reason: down },
      ]);
    });

    behaviour('a batch function that throws rejects the loads, it does not throw to the caller of load', async () => {
      const loader = impl.perRequest<number, number>(() => {
        throw new Error('sync failure');
      })();
      let promise: Promise<number> | undefined;
      expect(() => (promise = loader.load(1))).not.toThrow();
      await expect(promise).rejects.toBeInstanceOf(Error);
    });

    behaviour('a batch function must return a Promise', async () => {
      const loader = impl.perRequest<number, number>((ids) => ids.map((id) => id))();
      await expect(loader.load(1)).rejects.toBeInstanceOf(TypeError);
    });

    behaviour("a batch function that throws synchronously rejects each key with DataLoader's TypeError", async () => {
      const loader = impl.perRequest<number, number>(() => {
        throw new RangeError('db down');
      })();
      const error = await loader.load(1).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toContain('errored synchronously');
    });

    behaviour('an array-like batch result (not an Array) is accepted', async () => {
      const loader = impl.perRequest<number, string>(
        async (ids) => ({ ...ids.map((id) => `v:${id}`), length: ids.length }) as unknown as string[],
      )();
      expect(await loader.load(1)).toBe('v:1');
    });

    behaviour('a batch that rejects with a non-Error rejects each key with that value', async () => {
      const loader = impl.perRequest<number, string>(async () => {
        throw 'db down';
      })();
      expect(await loader.load(1).catch((e: unknown) => e)).toBe('db down');
    });

    behaviour('a sparse batch result (its last slot empty) is refused with a TypeError', async () => {
      const loader = impl.perRequest<number, string>(async (ids) => new Array<string>(ids.length))();
      expect(await loader.load(1).catch((e: unknown) => e)).toBeInstanceOf(TypeError);
    });

    behaviour('NaN is a key like any other', async () => {
      const loader = impl.perRequest<number, string>(async (ids) => ids.map(String))();
      expect(await loader.load(Number.NaN)).toBe('NaN');
    });
  });

  describe('batch scheduling', () => {
    behaviour('batchScheduleFn decides when the batch leaves: loads over several ticks share one call', async () => {
      const { schedule, dispatch } = manualScheduler();
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch, { batchScheduleFn: schedule })();
      const first = loader.load(1);
      await flush();
      const second = loader.load(2);
      await flush();
      expect(calls).toEqual([]);
      dispatch();
      expect(await Promise.all([first, second])).toEqual(['v:1', 'v:2']);
      expect(calls).toEqual([[1, 2]]);
    });

    behaviour('a time window (setTimeout) as batchScheduleFn collects the loads made within it', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch, { batchScheduleFn: (callback) => setTimeout(callback, 1000) })(); // wide: a loaded machine may deschedule us for 100 ms
      const first = loader.load(1);
      await new Promise((resolve) => setImmediate(resolve)); // a later turn of the event loop, well within the window
      const second = loader.load(2);
      await Promise.all([first, second]);
      expect(calls).toEqual([[1, 2]]);
    });

    behaviour('with a custom scheduler a cache hit also waits for the dispatch', async () => {
      const { schedule, dispatch } = manualScheduler();
      const loader = impl.perRequest(recording<number, string>().batch, { batchScheduleFn: schedule })();
      loader.prime(1, 'primed');
      let value: string | undefined;
      void loader.load(1).then((v) => (value = v));
      await flush();
      expect(value).toBeUndefined();
      dispatch();
      await flush();
      expect(value).toBe('primed');
    });
  });

  describe('memoization (the per-request cache)', () => {
    behaviour('a key loaded twice in one tick reaches the batch function once; both loads get the value', async () => {
      const { calls, batch } = recording<string, string>();
      const loader = impl.perRequest(batch)();
      expect(await Promise.all([loader.load('a'), loader.load('a')])).toEqual(['v:a', 'v:a']);
      expect(calls).toEqual([['a']]);
    });

    behaviour('a later load of a loaded key answers from the memo: same object, no batch call', async () => {
      const { calls, batch } = recording<number, { id: number }>((id) => ({ id }));
      const loader = impl.perRequest(batch)();
      const first = await loader.load(1);
      expect(await loader.load(1)).toBe(first);
      expect(calls).toEqual([[1]]);
    });

    behaviour(
      'cache hits resolve together with the pending batch, so the loads they lead to share the next batch',
      async () => {
        const { calls, batch } = recording<number, { bestFriend: number }>((id) => ({ bestFriend: id + 10 }));
        const users = impl.perRequest(batch)();
        users.prime(1, { bestFriend: 3 });
        const bestFriend = async (id: number) => users.load((await users.load(id)).bestFriend);
        await Promise.all([bestFriend(1), bestFriend(2)]);
        expect(calls.map((keys) => [...keys].sort((a, b) => a - b))).toEqual([[2], [3, 12]]);
      },
    );

    behaviour('cache hits resolve even when the batch they waited for fails', async () => {
      const loader = impl.perRequest<number, string>(async () => Promise.reject(new Error('down')))();
      loader.prime(1, 'primed');
      const [hit, miss] = await Promise.allSettled([loader.load(1), loader.load(2)]);
      expect(hit).toEqual({ status: 'fulfilled', value: 'primed' });
      expect(miss.status).toBe('rejected');
    });

    behaviour('clear(key) makes the next load of it call the batch function again', async () => {
      let version = 1;
      const { calls, batch } = recording<number, number>(() => version);
      const loader = impl.perRequest(batch)();
      expect(await loader.load(4)).toBe(1);
      version = 2; // a mutation
      loader.clear(4);
      expect(await loader.load(4)).toBe(2);
      expect(calls).toEqual([[4], [4]]);
    });

    behaviour('clearAll() makes every key load again', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch)();
      await loader.loadMany([1, 2]);
      loader.clearAll();
      await loader.loadMany([1, 2]);
      expect(calls).toEqual([
        [1, 2],
        [1, 2],
      ]);
    });

    behaviour('clear, clearAll and prime return the loader, for chaining', () => {
      const loader = impl.perRequest(recording<number, string>().batch)();
      expect(loader.clear(1)).toBe(loader);
      expect(loader.clearAll()).toBe(loader);
      expect(loader.prime(1, 'x')).toBe(loader);
    });

    behaviour('prime(key, value) answers a later load without a batch call', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch)();
      loader.prime(1, 'primed');
      expect(await loader.load(1)).toBe('primed');
      expect(calls).toEqual([]);
    });

    behaviour('prime does not change a key already in the memo', async () => {
      const loader = impl.perRequest(recording<number, string>().batch)();
      expect(await loader.load(1)).toBe('v:1');
      loader.prime(1, 'primed');
      expect(await loader.load(1)).toBe('v:1');
    });

    behaviour('clear(key).prime(key, value) primes forcefully', async () => {
      const loader = impl.perRequest(recording<number, string>().batch)();
      await loader.load(1);
      expect(await loader.clear(1).prime(1, 'forced').load(1)).toBe('forced');
    });

    behaviour('prime(key, error) makes the load of key reject with that error', async () => {
      const failure = new Error('primed failure');
      const loader = impl.perRequest(recording<number, string>().batch)();
      loader.prime(1, failure);
      await expect(loader.load(1)).rejects.toBe(failure);
    });

    behaviour('an Error returned for a key is memoized: the next load rejects with it, no batch call', async () => {
      const failure = new Error('no 1');
      const { calls, batch } = recording<number, number>(() => failure);
      const loader = impl.perRequest(batch)();
      await expect(loader.load(1)).rejects.toBe(failure);
      await expect(loader.load(1)).rejects.toBe(failure);
      expect(calls).toEqual([[1]]);
    });

    behaviour('clear(key) after a key Error lets the next load retry', async () => {
      let fail = true;
      const { calls, batch } = recording<number, number>((id) => (fail ? new Error('not yet') : id));
      const loader = impl.perRequest(batch)();
      await expect(loader.load(1)).rejects.toThrow('not yet');
      fail = false;
      expect(await loader.clear(1).load(1)).toBe(1);
      expect(calls).toEqual([[1], [1]]);
    });

    behaviour('a failed batch is not memoized: the next load of its keys calls the batch function again', async () => {
      let down = true;
      const calls: number[][] = [];
      const loader = impl.perRequest<number, number>(async (ids) => {
        calls.push([...ids]);
        if (down) throw new Error('backend down');
        return ids.map((id) => id);
      })();
      await expect(loader.load(1)).rejects.toThrow('backend down');
      down = false;
      expect(await loader.load(1)).toBe(1);
      expect(calls).toEqual([[1], [1]]);
    });

    behaviour('clearAll() inside the batch function: unique keys per batch, yet later loads load anew', async () => {
      const calls: number[][] = [];
      const loader: ReturnType<ReturnType<Implementation['perRequest']>> = impl.perRequest<number, number>(
        async (ids) => {
          loader.clearAll();
          calls.push([...ids]);
          return ids.map((id) => id);
        },
      )() as never;
      await Promise.all([loader.load(1), loader.load(1)]);
      await loader.load(1);
      expect(calls).toEqual([[1], [1]]);
    });

    behaviour('a batch function may prime another loader of the request (loading by alternative keys)', async () => {
      const byNameCalls: string[][] = [];
      type User = { id: number; username: string };
      const byName = impl.perRequest<string, User>(
        async (names) => (byNameCalls.push([...names]), names.map((username) => ({ id: 0, username }))),
      )();
      const byId = impl.perRequest<number, User>(async (ids) => {
        const users = ids.map((id) => ({ id, username: `user${id}` }));
        for (const user of users) byName.prime(user.username, user);
        return users;
      })();
      const ada = await byId.load(1);
      expect(await byName.load('user1')).toBe(ada);
      expect(byNameCalls).toEqual([]);
    });

    behaviour('loadMany uses the memo: keys loaded before are not loaded again', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch)();
      await loader.load(1);
      expect(await loader.loadMany([1, 2])).toEqual(['v:1', 'v:2']);
      expect(calls).toEqual([[1], [2]]);
    });

    behaviour('load(k) after clear(k) while k is in flight joins nothing and loads again', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch)();
      const first = loader.load(1);
      loader.clear(1);
      const second = loader.load(1);
      await Promise.all([first, second]);
      expect(calls).toEqual([[1, 1]]);
    });
  });

  describe('cache: false and cacheMap', () => {
    behaviour('cache: false sends every load to the batch function, duplicates included', async () => {
      const { calls, batch } = recording<string, string>();
      const loader = impl.perRequest(batch, { cache: false })();
      await Promise.all([loader.load('A'), loader.load('B'), loader.load('A')]);
      expect(calls).toEqual([['A', 'B', 'A']]);
    });

    behaviour('cache: false loads a key again on every later load', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch, { cache: false })();
      await loader.load(1);
      await loader.load(1);
      expect(calls).toEqual([[1], [1]]);
    });

    behaviour('cache: false makes prime a no-op', async () => {
      const { calls, batch } = recording<number, string>();
      const loader = impl.perRequest(batch, { cache: false })();
      expect(loader.prime(1, 'primed')).toBe(loader);
      expect(await loader.load(1)).toBe('v:1');
      expect(calls).toEqual([[1]]);
    });

    behaviour('cacheMap: null is the same as cache: false', async () => {
      const { calls, batch } = recording<string, string>();
      const loader = impl.perRequest(batch, { cacheMap: null })();
      await Promise.all([loader.load('A'), loader.load('A')]);
      expect(calls).toEqual([['A', 'A']]);
    });

    behaviour('a custom cacheMap holds the memo: get, set, delete and clear are called on it', async () => {
      const map = new Map<string, Promise<string>>();
      const used: string[] = [];
      const cacheMap = {
        get: (key: string) => (used.push(`get ${key}`), map.get(key)),
        set: (key: string, value: Promise<string>) => (used.push(`set ${key}`), map.set(key, value)),
        delete: (key: string) => (used.push(`delete ${key}`), map.delete(key)),
        clear: () => (used.push('clear'), map.clear()),
      };
      const loader = impl.perRequest<string, string>(recording<string, string>().batch, { cacheMap })();
      await loader.load('a');
      expect(await map.get('a')).toBe('v:a');
      loader.clear('a');
      loader.clearAll();
      expect(used).toEqual(['get a', 'set a', 'delete a', 'clear']);
    });

    behaviour('a bounded cacheMap (an LRU) evicts: an evicted key is loaded again', async () => {
      const lru = new Map<string, Promise<string>>();
      const cacheMap = {
        get: (key: string) => lru.get(key),
        set: (key: string, value: Promise<string>) => {
          lru.clear(); // capacity 1
          lru.set(key, value);
        },
        delete: (key: string) => lru.delete(key),
        clear: () => lru.clear(),
      };
      const { calls, batch } = recording<string, string>();
      const loader = impl.perRequest(batch, { cacheMap })();
      await loader.load('a');
      await loader.load('b');
      await loader.load('b');
      await loader.load('a');
      expect(calls).toEqual([['a'], ['b'], ['a']]);
    });
  });

  describe('keys', () => {
    behaviour('cacheKeyFn makes equivalent object keys one key', async () => {
      const { calls, batch } = recording<{ id: number }, number>((key) => key.id);
      const loader = impl.perRequest(batch, { cacheKeyFn: (key) => String(key.id) })();
      expect(await Promise.all([loader.load({ id: 1 }), loader.load({ id: 1 })])).toEqual([1, 1]);
      expect(calls).toHaveLength(1);
      expect(calls[0]).toHaveLength(1);
    });

    behaviour('the batch function receives the keys as loaded, not their cache keys', async () => {
      const { calls, batch } = recording<{ id: number }, number>((key) => key.id);
      const loader = impl.perRequest(batch, { cacheKeyFn: (key) => `user-${key.id}` })();
      const key = { id: 7 };
      await loader.load(key);
      expect(calls[0]![0]).toBe(key);
    });

    behaviour('cacheKeyFn is called with the loader as this', async () => {
      let self: unknown;
      const loader = impl.perRequest<{ id: number }, number>(async (keys) => keys.map((k) => k.id), {
        cacheKeyFn(this: unknown, key) {
          self = this; // eslint-disable-line @typescript-eslint/no-this-alias -- the receiver is what is checked
          return String(key.id);
        },
      })();
      await loader.load({ id: 1 });
      expect(self).toBe(loader);
    });

    behaviour('keys 1 and "1" are different keys', async () => {
      const { calls, batch } = recording<number | string, string>();
      const loader = impl.perRequest(batch)();
      await Promise.all([loader.load(1), loader.load('1')]);
      expect(calls).toEqual([[1, '1']]);
    });

    behaviour('object keys without cacheKeyFn are compared by identity', async () => {
      const { calls, batch } = recording<{ id: number }, number>((key) => key.id);
      const loader = impl.perRequest(batch)();
      const key = { id: 1 };
      await Promise.all([loader.load(key), loader.load(key), loader.load({ id: 1 })]);
      expect(calls).toEqual([[key, { id: 1 }]]);
    });

    behaviour('load(null) and load(undefined) throw a TypeError at once', () => {
      const loader = impl.perRequest(recording<unknown, string>().batch)();
      expect(() => loader.load(null)).toThrow(TypeError);
      expect(() => loader.load(undefined)).toThrow(TypeError);
    });
  });

  describe('loadMany', () => {
    behaviour('loadMany resolves the values in key order', async () => {
      const loader = impl.perRequest(recording<string, string>().batch)();
      expect(await loader.loadMany(['b', 'a', 'c'])).toEqual(['v:b', 'v:a', 'v:c']);
    });

    behaviour('loadMany never rejects for a key: an Error stands in its place', async () => {
      const loader = impl.perRequest<string, string>(async (keys) =>
        keys.map((key) => (key === 'badkey' ? new Error('no badkey') : key)),
      )();
      const [a, b, c] = await loader.loadMany(['a', 'b', 'badkey']);
      expect([a, b]).toEqual(['a', 'b']);
      expect(c).toBeInstanceOf(Error);
    });

    behaviour('loadMany of something that is not an array throws a TypeError at once', () => {
      const loader = impl.perRequest(recording<string, string>().batch)();
      expect(() => loader.loadMany('abc' as never)).toThrow(TypeError);
    });

    behaviour('loadMany of no keys resolves to an empty array without a batch call', async () => {
      const { calls, batch } = recording<string, string>();
      const loader = impl.perRequest(batch)();
      expect(await loader.loadMany([])).toEqual([]);
      await flush();
      expect(calls).toEqual([]);
    });
  });

  describe('per request', () => {
    behaviour('each request has its own memo: prime and clear in one do not reach another', async () => {
      const { calls, batch } = recording<number, string>();
      const perRequest = impl.perRequest(batch);
      const one = perRequest();
      const two = perRequest();
      one.prime(1, 'primed in one');
      expect(await two.load(1)).toBe('v:1');
      expect(await one.load(1)).toBe('primed in one');
      expect(calls).toEqual([[1]]);
    });

    behaviour('a later request loads again: nothing outlives the request it was loaded in', async () => {
      let version = 1;
      const { calls, batch } = recording<number, number>(() => version);
      const perRequest = impl.perRequest(batch);
      expect(await perRequest().load(1)).toBe(1);
      version = 2;
      expect(await perRequest().load(1)).toBe(2);
      expect(calls).toEqual([[1], [1]]);
    });

    behaviour('concurrent requests loading the same key share one batch call', async () => {
      const { calls, batch } = recording<number, string>();
      const perRequest = impl.perRequest(batch);
      await Promise.all([perRequest().load(1), perRequest().load(1)]);
      expect(calls).toEqual([[1], [1]]);
    });
  });

  describe('construction', () => {
    behaviour('name is the loader name given', () => {
      expect(impl.perRequest(recording<number, string>().batch, { name: 'users' })().name).toBe('users');
    });

    behaviour('name defaults to null', () => {
      expect(impl.perRequest(recording<number, string>().batch)().name).toBeNull();
    });

    behaviour('a batch function that is not a function is refused at construction', () => {
      expect(() => impl.perRequest('nope' as never)()).toThrow();
    });

    behaviour('bad options are refused at construction', () => {
      const { batch } = recording<number, string>();
      expect(() => impl.perRequest(batch, { maxBatchSize: 0 })()).toThrow();
      expect(() => impl.perRequest(batch, { batchScheduleFn: 'soon' as never })()).toThrow();
      expect(() => impl.perRequest(batch, { cacheKeyFn: 'id' as never })()).toThrow();
      expect(() => impl.perRequest(batch, { cacheMap: { get: () => undefined } as never })()).toThrow();
    });
  });

  describe('unhandled rejections', () => {
    // One child process per implementation runs both scenarios (see unhandled-probe.ts).
    let reported: Promise<Record<string, string>>;
    beforeAll(() => {
      reported = promisify(execFile)(
        process.execPath,
        [require.resolve('tsx/cli'), join(__dirname, 'unhandled-probe.ts'), impl.name],
        { timeout: 25_000 },
      ).then(({ stdout }) => JSON.parse(stdout) as Record<string, string>);
      reported.catch(() => {}); // each test below awaits it and fails with the reason
    });

    behaviour('a rejected load that nobody handles is an unhandled rejection', async () => {
      expect((await reported)['rejected-load']).toBe('unhandled: no a');
    });

    behaviour('a primed Error that is never loaded is not an unhandled rejection', async () => {
      expect((await reported)['primed-error']).toBe('none');
    });
  });
});

test('every intended difference names a behaviour of the suite', () => {
  for (const name of Object.keys(INTENDED_DIFFERENCES)) expect(behaviours).toContain(name);
});

/**
 * What DataLoader's options mean where herdcache adds a shared registry underneath: a
 * batchScheduleFn window shared by concurrent requests, cache: false bypassing cross-request
 * single-flight and the store, `this` when a batch carries keys of several requests, the key
 * error that shows its fix.
 */
import { HerdcacheError, createCache } from '../../src/core';
import { countingStore, deferred, flush } from '../helpers';
import { memoryStore } from '../../src/core';

function manualScheduler() {
  let callbacks: (() => void)[] = [];
  return {
    schedule: (dispatch: () => void) => void callbacks.push(dispatch),
    get pending() {
      return callbacks.length;
    },
    dispatch() {
      const now = callbacks;
      callbacks = [];
      now.forEach((callback) => callback());
    },
  };
}

describe('batchScheduleFn on the shared loader', () => {
  it('a window lets concurrent requests arriving in different ticks share one batch call', async () => {
    const cache = createCache();
    const window = manualScheduler();
    const calls: string[][] = [];
    const users = cache.loader<string, string>({
      name: 'user',
      batchScheduleFn: window.schedule,
      batch: async (ids) => (calls.push([...ids]), ids.map((id) => `u${id}`)),
    });
    const first = cache.request().loader(users).loadMany(['1', '2']);
    await flush();
    const second = cache.request().loader(users).loadMany(['2', '3']);
    await flush();
    expect(calls).toEqual([]);
    window.dispatch();
    expect(await Promise.all([first, second])).toEqual([
      ['u1', 'u2'],
      ['u2', 'u3'],
    ]);
    expect(calls).toEqual([['1', '2', '3']]);
  });

  it('without a window the same arrivals make one batch call per tick', async () => {
    const cache = createCache();
    const calls: string[][] = [];
    const users = cache.loader<string, string>({
      name: 'user',
      batch: async (ids) => (calls.push([...ids]), ids.map((id) => `u${id}`)),
    });
    const first = cache.request().loader(users).loadMany(['1', '2']);
    await flush();
    const second = cache.request().loader(users).loadMany(['2', '3']);
    await Promise.all([first, second]);
    expect(calls).toEqual([
      ['1', '2'],
      ['2', '3'],
    ]);
  });

  it('a windowed loader keeps its keys apart from the tick dispatch of other loaders', async () => {
    const cache = createCache();
    const window = manualScheduler();
    const order: string[] = [];
    const slow = cache.loader<string, string>({
      name: 'slow',
      batchScheduleFn: window.schedule,
      batch: async (ids) => (order.push(`slow ${ids}`), ids),
    });
    const fast = cache.loader<string, string>({ name: 'fast', batch: async (ids) => (order.push(`fast ${ids}`), ids) });
    const scope = cache.request();
    const s = scope.load(slow, 'a');
    expect(await scope.load(fast, 'b')).toBe('b');
    expect(order).toEqual(['fast b']);
    window.dispatch();
    expect(await s).toBe('a');
    expect(order).toEqual(['fast b', 'slow a']);
  });

  it('a scheduler that throws falls back to the tick; one that calls back twice dispatches once', async () => {
    const cache = createCache();
    const calls: string[][] = [];
    const batch = async (ids: readonly string[]) => (calls.push([...ids]), ids);
    const throwing = cache.loader<string, string>({
      name: 'throwing',
      batch,
      batchScheduleFn: () => {
        throw new Error('scheduler bug');
      },
    });
    expect(await throwing.load('x')).toBe('x');
    const twice = cache.loader<string, string>({
      name: 'twice',
      batch,
      batchScheduleFn: (dispatch) => {
        dispatch();
        dispatch();
      },
    });
    const loads = Promise.all([twice.load('y'), twice.load('z')]);
    expect(await loads).toEqual(['y', 'z']);
    expect(calls).toEqual([['x'], ['y'], ['z']]); // dispatched at once: each load its own window
  });

  it('a batchScheduleFn that is not a function is refused, naming the option', () => {
    const cache = createCache();
    expect(() =>
      cache.loader({ name: 'x', batch: async (k: readonly string[]) => k, batchScheduleFn: 5 as never }),
    ).toThrow(/option "batchScheduleFn" must be a function/);
  });
});

describe('cache: false on a scoped loader', () => {
  it("neither joins another request's fill in flight nor reads or writes the store", async () => {
    const { store, calls } = countingStore(memoryStore());
    const cache = createCache({ store, ttl: 60_000 });
    const gate = deferred<void>();
    const batches: string[][] = [];
    const users = cache.loader<string, string>({
      name: 'user',
      batch: async (ids) => {
        batches.push([...ids]);
        await gate.promise;
        return ids.map((id) => `u${id}`);
      },
    });
    const shared = cache.request().loader(users).load('1'); // starts the shared fill
    await flush();
    const getManyBefore = calls.getMany;
    const alone = cache.request().loader(users, { cache: false });
    const own = alone.load('1');
    await flush();
    expect(batches).toEqual([['1'], ['1']]); // its own batch call, not a join
    gate.resolve();
    expect(await Promise.all([shared, own])).toEqual(['u1', 'u1']);
    expect(calls.getMany).toBe(getManyBefore);
    expect(calls.setMany).toBe(1); // the shared fill's write only
    // A stored value does not answer it either.
    expect(await alone.load('1')).toBe('u1');
    expect(batches).toHaveLength(3);
    expect(cache.metrics().sources.user).toMatchObject({ misses: 3, coalesced: 0 });
  });

  it('cacheMap must have get, set, delete and clear: the error names what is missing', () => {
    const cache = createCache();
    const users = cache.loader<string, string>({ name: 'user', batch: async (ids) => ids });
    expect(() => cache.request().loader(users, { cacheMap: { get() {}, set() {} } as never })).toThrow(
      /option "cacheMap" .*missing: delete, clear/,
    );
    expect(() => cache.request().loader(users, { cache: 'no' as never })).toThrow(HerdcacheError);
  });

  it('a cacheMap the user filled with a value (not a promise): load() answers it, never throws', async () => {
    const cache = createCache();
    let batches = 0;
    const users = cache.loader<string, string>({ name: 'user', batch: async (ids) => (batches++, ids) });
    const map = new Map<string, Promise<string>>([['x', 'held' as unknown as Promise<string>]]);
    const scoped = cache.request().loader(users, { cacheMap: map });
    let loaded: Promise<string> | undefined;
    expect(() => (loaded = scoped.load('x'))).not.toThrow();
    expect(await loaded).toBe('held');
    expect(await scoped.load('y')).toBe('y');
    expect(batches).toBe(1);
  });

  it("scope.loader(loader) is the scope's one view; with options it is a new view with its own memo", () => {
    const cache = createCache();
    const users = cache.loader<string, string>({ name: 'user', batch: async (ids) => ids });
    const scope = cache.request();
    expect(scope.loader(users)).toBe(scope.loader(users));
    expect(scope.loader(users, {})).not.toBe(scope.loader(users));
  });

  it("a scope's views of several loaders: each loader's one view, kept as more loaders are viewed", async () => {
    const cache = createCache();
    const loaders = ['a', 'b', 'c'].map((name) =>
      cache.loader<string, string>({ name, batch: async (ids) => ids.map((id) => `${name}:${id}`) }),
    );
    const scope = cache.request();
    const first = scope.loader(loaders[0]!);
    const views = loaders.map((loader) => scope.loader(loader));
    expect(views[0]).toBe(first);
    expect(new Set(views).size).toBe(3);
    loaders.forEach((loader, i) => expect(scope.loader(loader)).toBe(views[i]));
    expect(views.map((view) => view.name)).toEqual(['a', 'b', 'c']);
    expect(await Promise.all(views.map((view) => view.load('1')))).toEqual(['a:1', 'b:1', 'c:1']);
    expect(cache.request().loader(loaders[1]!)).not.toBe(views[1]);
    // The request's getOrCompute memo beside them: its answers and the views stay apart.
    let fills = 0;
    const fill = async () => ++fills;
    expect(await scope.getOrCompute('a', fill)).toBe(1);
    expect(await scope.getOrCompute('a', fill)).toBe(1);
    loaders.forEach((loader, i) => expect(scope.loader(loader)).toBe(views[i]));
    expect(await scope.loader(loaders[2]!).load('2')).toBe('c:2');
  });
});

describe('this and keys', () => {
  it('a batch carrying keys of two requests is called with the scoped loader of the request that opened it', async () => {
    const cache = createCache();
    const holders: unknown[] = [];
    const users = cache.loader<string, string>({
      name: 'user',
      batch(this: unknown, ids) {
        holders.push(this);
        return ids.map((id) => id);
      },
    });
    const a = cache.request().loader(users);
    const b = cache.request().loader(users);
    await Promise.all([a.load('1'), b.load('2')]);
    expect(holders).toEqual([a]);
    await users.load('3'); // a direct load: the shared loader
    expect(holders[1]).toBe(users);
  });

  it("an object key without a key function throws a TypeError that shows the fix with the key's fields", () => {
    const cache = createCache();
    const posts = cache.loader<{ authorId: number; slug: string }, string>({
      name: 'post',
      batch: async (keys) => keys.map((k) => k.slug),
    });
    const scoped = cache.request().loader(posts);
    let thrown: unknown;
    try {
      void scoped.load({ authorId: 1, slug: 'hello' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect(thrown).toBeInstanceOf(HerdcacheError);
    expect(thrown).toMatchObject({ code: 'E_INVALID_KEY' });
    expect((thrown as Error).message).toContain(
      'cache.loader({ name: "post", key: (k) => `${k.authorId}:${k.slug}`, batch })',
    );
  });
});

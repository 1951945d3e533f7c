/** LateTagged fills (the response layer's): tags known when the value is, and the race they must not lose. */
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import type { Entry } from '../../src/core/freshness';
import { LateTagged } from '../../src/core/late-tags';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { redisStore } from '../../src/redis';
import { asyncStore, countingStore, deferred, flush } from '../helpers';
import { connect, randomPrefix } from '../redis/helpers';
import type Redis from 'ioredis';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

const lateLoad = (cache: ReturnType<typeof createCache>, key: string, fill: () => unknown) => {
  const c = cache._computation({ ttl: 60_000, label: 'response' });
  return cache._load<unknown>(c.source, key, fill, { ...c.policy, lateTags: true }, undefined, undefined);
};

describe('a late-tagged miss on a store read wholly and synchronously is filled in the step that read it', () => {
  it('memory: its fill starts before the load returns, with no second read at the tick; a load of the key in the same step joins it', async () => {
    const { store, calls } = countingStore(memoryStore());
    const cache = createCache({ store });
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
    const first = lateLoad(cache, 'k', fill);
    expect(fills).toBe(1);
    const second = lateLoad(cache, 'k', fill);
    expect(await Promise.all([first, second])).toEqual([{ n: 1 }, { n: 1 }]);
    expect(fills).toBe(1);
    expect(calls.getMany).toBe(0);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 }); // written: a hit
    expect(cache.metrics().sources.response).toMatchObject({ misses: 1, coalesced: 1, hits: 1, fills: 1 });
  });

  it('not on a store without getSync, nor with a fill lock (Redis), nor for keys that are not late-tagged: they wait for the tick', async () => {
    for (const store of [asyncStore(memoryStore()).store, redisStore({ client, prefix: randomPrefix('late-now') })]) {
      const cache = createCache({ store });
      let fills = 0;
      const pending = lateLoad(cache, 'k', () => new LateTagged({ n: ++fills }, ['User:1']));
      expect(fills).toBe(0);
      expect(await pending).toEqual({ n: 1 });
    }
    const cache = createCache();
    let fills = 0;
    const pending = cache.getOrCompute('k', () => ++fills, { ttl: 60_000 });
    expect(fills).toBe(0);
    expect(await pending).toBe(1);
  });
});

describe.each([
  ['memory', () => undefined],
  ['redis', () => redisStore({ client, prefix: randomPrefix('late') })],
])('late tags (%s)', (_name, store) => {
  it('the value is stored with its late tags: invalidating one of them makes it a miss', async () => {
    const cache = createCache({ store: store() });
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    await cache.invalidateTags(['User:2']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    await cache.invalidateTags(['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
  });

  it('tags a fill vouches distinct are stored as given: invalidating any one of them makes it a miss', async () => {
    const cache = createCache({ store: store() });
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1', 'Post:2'], true);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    await cache.invalidateTags(['Post:2']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    await cache.invalidateTags(['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 3 });
  });

  it('a tag of its value invalidated while a late-tagged fill runs abandons it when it ends: not written, its waiters start over', async () => {
    const cache = createCache({ store: store() });
    const gate = deferred<void>();
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(cache, 'k', fill);
    // The fill starts after the store's read (a Redis round trip: more than a few ticks on a loaded machine).
    for (let i = 0; i < 500 && fills === 0; i++) await flush(2);
    expect(fills).toBe(1);
    await cache.invalidateTags(['User:1']); // the fill's tags are not known yet: noted, checked when it ends
    await flush(5);
    expect(fills).toBe(1); // not abandoned before it ends: it may not hold the tag
    gate.resolve();
    expect(await first).toEqual({ n: 2 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    expect(fills).toBe(2);
  });

  it('tags of other values invalidated while a late-tagged fill runs leave it be: written, its waiters answered', async () => {
    const cache = createCache({ store: store() });
    const gate = deferred<void>();
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(cache, 'k', fill);
    for (let i = 0; i < 500 && fills === 0; i++) await flush(2);
    const second = lateLoad(cache, 'k', fill); // a waiter
    for (let i = 0; i < 20; i++) await cache.invalidateTags([`Unrelated:${i}`]); // a stream of other writes
    gate.resolve();
    expect(await first).toEqual({ n: 1 });
    expect(await second).toEqual({ n: 1 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 }); // written
    expect(fills).toBe(1);
    await cache.invalidateTags(['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 }); // its own tag still invalidates it
  });
});

it('before its fill runs (its store read under way), a tag invalidation abandons a late-tagged flight: the read may predate it', async () => {
  const inner = memoryStore();
  let gate = deferred<void>();
  let holdReads = false;
  let reads = 0;
  // The memory store's entries, read through an async getMany that answers what it read when called.
  const slow: Store = {
    name: 'slow',
    getMany: async (keys) => {
      reads++;
      const entries = await inner.getMany(keys);
      if (holdReads) await gate.promise;
      return entries;
    },
    setMany: (writes) => inner.setMany(writes),
    delete: (keys) => inner.delete(keys),
    invalidateTags: (tags) => inner.invalidateTags!(tags),
    clear: () => inner.clear(),
  } as Store;
  const cache = createCache({ store: slow });
  let fills = 0;
  const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
  expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
  const read = async (tag: string) => {
    holdReads = true;
    gate = deferred<void>();
    const before = reads;
    const reading = lateLoad(cache, 'k', fill); // its read finds { n: 1 }, then waits
    await flush(5);
    await cache.invalidateTags([tag]);
    holdReads = false;
    gate.resolve();
    return { value: await reading, reads: reads - before };
  };
  // Any tag: the value's tags are not known before it is read. Read again: still there, { n: 1 }.
  expect(await read('Unrelated:1')).toEqual({ value: { n: 1 }, reads: 2 });
  // Its own tag: the read's { n: 1 } predates the invalidation; read again, a miss, filled.
  expect(await read('User:1')).toEqual({ value: { n: 2 }, reads: 2 });
  expect(fills).toBe(2);
});

it('a refresh of a late-tagged value: once a tag of the value it replaces is invalidated, that value is no longer served', async () => {
  const clock = manualClock();
  const cache = createCache({ clock });
  const c = cache._computation({ ttl: 1_000, swr: 60_000, label: 'response' });
  const load = (fill: () => unknown) =>
    cache._load<unknown>(c.source, 'k', fill, { ...c.policy, lateTags: true }, undefined, undefined);
  let fills = 0;
  let gate = deferred<void>();
  const fill = async () => {
    const n = ++fills;
    if (n === 2) await gate.promise;
    return new LateTagged({ n }, ['User:1']);
  };
  expect(await load(fill)).toEqual({ n: 1 });
  clock.advance(2_000); // stale, within its grace
  expect(await load(fill)).toEqual({ n: 1 }); // served stale, its refresh starts
  for (let i = 0; i < 50 && fills < 2; i++) await flush(2);
  expect(fills).toBe(2);
  await cache.invalidateTags(['Other:1']);
  expect(await load(fill)).toEqual({ n: 1 }); // another entity's write: still served stale
  await cache.invalidateTags(['User:1']);
  const after = load(fill); // waits: the value it would be served holds the invalidated tag
  gate.resolve();
  gate = deferred<void>();
  gate.resolve();
  // The refresh ended holding the tag: abandoned, filled again.
  expect(await after).toEqual({ n: 3 });
  expect(fills).toBe(3);
});

it('an invalidation of its tag landing any number of microtasks after the fill returned, before the write: never left stored', async () => {
  for (let delay = 0; delay < 25; delay++) {
    const cache = createCache();
    const c = cache._computation({ ttl: 60_000, label: 'response' });
    const load = (fill: () => unknown) =>
      cache._load<{ n: number }>(c.source, 'k', fill, { ...c.policy, lateTags: true }, undefined, undefined);
    let db = 1;
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      const read = db;
      await flush(1);
      let later: Promise<void> = Promise.resolve();
      for (let i = 0; i < delay; i++) later = later.then(() => {});
      // A mutation right after the fill returns: its write, then its invalidation.
      if (n === 1)
        void later.then(() => {
          db = 2;
          void cache.invalidateTags(['User:1']);
        });
      return new LateTagged({ n: read }, ['User:1']);
    };
    await load(fill);
    await flush(50);
    expect({ delay, after: (await load(fill)).n }).toEqual({ delay, after: 2 });
    await cache.close();
  }
});

/**
 * On a store with a tag clock (Store.tagClock + tagVersionsSince): an invalidation this process
 * does not hear of (another replica's, made on the store directly here) landing while a late-tagged
 * fill runs keeps its value out of the store. A store of the test's own, in memory: no lock, so the
 * fill reads the clock itself, just before it starts.
 */
describe('late tags on a store with a tag clock', () => {
  const clockedStore = () => {
    const entries = new Map<string, Entry>();
    const versions = new Map<string, number>();
    const readings = new Map<string, number>();
    let clock = 100;
    const log: string[] = [];
    const control = { failClock: false };
    const bump = (tags: readonly string[]) => {
      clock++;
      for (const tag of tags) {
        versions.set(tag, (versions.get(tag) ?? 0) + 1);
        readings.set(tag, clock);
      }
    };
    const store: Store = {
      name: 'clocked',
      getMany: async (keys) => keys.map((key) => entries.get(key)),
      setMany: async (writes) => {
        for (const write of writes) entries.set(write.key, write.entry);
      },
      delete: async (keys) => {
        for (const key of keys) entries.delete(key);
      },
      clear: async () => entries.clear(),
      invalidateTags: async (tags) => bump(tags),
      tagVersions: async (tags) => (log.push('tagVersions'), tags.map((tag) => versions.get(tag) ?? 0)),
      tagClock: async () => {
        log.push('tagClock');
        if (control.failClock) throw new Error('the clock is down');
        return clock;
      },
      tagVersionsSince: async (tags, since) => {
        log.push(`tagVersionsSince ${since}`);
        return tags.map((tag) => ((readings.get(tag) ?? 0) > since ? NaN : (versions.get(tag) ?? 0)));
      },
    };
    return { store, entries, log, control, elsewhere: bump };
  };

  it('a late tag invalidated elsewhere while the fill runs: the value is served, not stored; the clock was read before the fill', async () => {
    const { store, entries, log, elsewhere } = clockedStore();
    const cache = createCache({ store });
    const gate = deferred<void>();
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      log.push('fill');
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(cache, 'k', fill);
    for (let i = 0; i < 100 && fills === 0; i++) await flush(2);
    elsewhere(['User:1']); // this process does not hear of it: the flight is not abandoned
    gate.resolve();
    expect(await first).toEqual({ n: 1 }); // served to its callers
    expect(entries.has('k')).toBe(false); // not stored
    expect(log).toEqual(['tagClock', 'fill', 'tagVersionsSince 100']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 }); // stored this time: nothing moved
    expect(fills).toBe(2);
  });

  it('an invalidation elsewhere before the fill started, or of a tag the value does not carry: stored', async () => {
    const { store, entries, elsewhere } = clockedStore();
    const cache = createCache({ store });
    const gate = deferred<void>();
    let fills = 0;
    elsewhere(['User:1']);
    const fill = async () => {
      const n = ++fills;
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(cache, 'k', fill);
    for (let i = 0; i < 100 && fills === 0; i++) await flush(2);
    elsewhere(['User:2']);
    gate.resolve();
    expect(await first).toEqual({ n: 1 });
    expect(entries.get('k')?.tagVersions).toEqual([1]);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    expect(fills).toBe(1);
  });

  it('a clock that cannot be read: the value is served, not stored, and the failure counted', async () => {
    const { store, entries, control } = clockedStore();
    const errors: string[] = [];
    const cache = createCache({ store, hooks: { onStoreError: (_error, operation) => errors.push(operation) } });
    control.failClock = true;
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    expect(entries.has('k')).toBe(false);
    expect(errors).toEqual(['tagClock']);
    control.failClock = false;
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
  });

  it('loads that are not late-tagged never read the clock', async () => {
    const { store, log } = clockedStore();
    const cache = createCache({ store });
    expect(await cache.getOrCompute('a', () => 1, { ttl: 60_000 })).toBe(1);
    expect(await cache.getOrCompute('b', () => 2, { ttl: 60_000, tags: ['User:1'] })).toBe(2);
    expect(await cache.getOrCompute('b', () => 3, { ttl: 60_000, tags: ['User:1'] })).toBe(2);
    expect(log.filter((call) => call.startsWith('tagClock') || call.startsWith('tagVersionsSince'))).toEqual([]);
  });
});

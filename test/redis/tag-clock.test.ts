/**
 * The tag clock (src/redis/tag-clock.ts) on a real redis-server: a late-tagged fill (tags known when
 * it ends: a whole response) reads it before it starts, and a late tag invalidated on another client
 * between that read and the fill's write keeps the value out of the store. Two stores on two
 * connections stand for two replicas; neither hears the other's invalidations (redisStore alone).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { LateTagged } from '../../src/core/late-tags';
import { TAG_SEQUENCE_SUFFIX, tagClockKey, tagVersionKey } from '../../src/redis/keys';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { tieredStore } from '../../src/redis/tiered';
import { deferred } from '../helpers';
import { connect, eventually, randomPrefix } from './helpers';
import { controllableL2 } from './tiered/helpers';

const clients: Redis[] = [];
const client = async () => {
  const made = await connect();
  clients.push(made);
  return made;
};
afterAll(() => {
  for (const made of clients) made.disconnect();
});

type Cache = ReturnType<typeof createCache>;
const lateLoad = (cache: Cache, key: string, fill: () => unknown, lock = true) => {
  const c = cache._computation({ ttl: 60_000, label: 'response' });
  return cache._load<unknown>(c.source, key, fill, { ...c.policy, lateTags: true, lock }, undefined, undefined);
};

/** Two stores on one prefix, each on a connection of its own. */
const replicas = async (label: string): Promise<[RedisStore, RedisStore, string]> => {
  const prefix = randomPrefix(label);
  return [redisStore({ client: await client(), prefix }), redisStore({ client: await client(), prefix }), prefix];
};

/** Waits (bounded) until the fill has started: after a few store round trips (slow on a loaded machine). */
const started = async (fills: () => number) => {
  expect(await eventually(() => fills() > 0, 10_000, 1)).toBe(true);
};

describe('store level', () => {
  it('tagVersionsSince: a tag invalidated on another client after the clock was read is NaN; before it, its version', async () => {
    const [a, b] = await replicas('clock-since');
    await b.invalidateTags(['Before']);
    const clock = await a.tagClock();
    await b.invalidateTags(['During']);
    const [before, during, never] = await a.tagVersionsSince(['Before', 'During', 'Never'], clock);
    expect(before).toBeGreaterThan(0);
    expect(during).toBeNaN();
    expect(never).toBeGreaterThan(0); // made by this read (a missing version key is made, never read as 0)
    const versions = await a.tagVersions(['Before', 'During', 'Never']); // versions count as before
    expect(versions[0]).toBe(before);
    expect(versions[1]).toBeGreaterThan(0);
    expect(versions[2]).toBe(never);
    const later = await a.tagClock();
    expect(later).toBeGreaterThan(clock);
    expect(await a.tagVersionsSince(['Before', 'During', 'Never'], later)).toEqual(versions);
  });

  it('every invalidation after a reading gets a reading above it: with the clock key missing, or far ahead of time', async () => {
    const [a, , prefix] = await replicas('clock-readings');
    const admin = await client();
    const sequence = async (tag: string) =>
      Number(await admin.get(tagVersionKey(prefix, tag, 256) + TAG_SEQUENCE_SUFFIX));
    await admin.del(tagClockKey(prefix)); // never set, evicted, deleted by hand: the server's time stands in
    const first = await a.tagClock();
    expect(first).toBeGreaterThan(Date.now() * 1000 - 60e6); // microseconds
    await a.invalidateTags(['T']);
    expect(await sequence('T')).toBeGreaterThan(first);
    const ahead = (Date.now() + 3_600_000) * 1000;
    await admin.set(tagClockKey(prefix), String(ahead));
    expect(await a.tagClock()).toBe(ahead);
    await a.invalidateTags(['T', 'U']);
    expect([await sequence('T'), await sequence('U')]).toEqual([ahead + 1, ahead + 1]);
    expect(await admin.pttl(tagClockKey(prefix))).toBeGreaterThan(0); // it expires as version keys do
    // A reading below a tag's own (a Cluster's bumps may reach a slot out of order): the tag keeps its latest.
    await admin.del(tagClockKey(prefix));
    await a.invalidateTags(['T']);
    expect(await sequence('T')).toBe(ahead + 1);
    // Something foreign at the clock or at a tag's reading: read as nothing there, replaced by the next bump.
    await admin.set(tagClockKey(prefix), 'not a reading');
    await admin.set(tagVersionKey(prefix, 'T', 256) + TAG_SEQUENCE_SUFFIX, 'garbage');
    const clock = await a.tagClock();
    expect(await a.tagVersionsSince(['T'], clock)).toEqual([NaN]); // unknown: not stored
    await a.invalidateTags(['T']);
    expect(await sequence('T')).toBeGreaterThan(clock);
  });
});

describe('through createCache: a late-tagged fill on A spanning an invalidation on B', () => {
  it('cold key (the clock rides the read that takes the lock): served, not stored; the next load on either fills again', async () => {
    const [a, b] = await replicas('clock-cold');
    const [ca, cb] = [createCache({ store: a }), createCache({ store: b })];
    const gate = deferred<void>();
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(ca, 'k', fill);
    await started(() => fills);
    await cb.invalidateTags(['User:1']);
    gate.resolve();
    expect(await first).toEqual({ n: 1 });
    expect(await a.getMany(['k'])).toEqual([undefined]);
    expect(await lateLoad(cb, 'k', fill)).toEqual({ n: 2 });
    expect(await lateLoad(ca, 'k', fill)).toEqual({ n: 2 }); // stored this time
    expect(fills).toBe(2);
  });

  it('the same without the invalidation: stored (a hit on both)', async () => {
    const [a, b] = await replicas('clock-control');
    const [ca, cb] = [createCache({ store: a }), createCache({ store: b })];
    let fills = 0;
    const fill = async () => new LateTagged({ n: ++fills }, ['User:1']);
    expect(await lateLoad(ca, 'k', fill)).toEqual({ n: 1 });
    await cb.invalidateTags(['User:2']);
    expect(await lateLoad(cb, 'k', fill)).toEqual({ n: 1 });
    expect(fills).toBe(1);
  });

  it('a stored value outdated by its tags (read present, refilled through the lock step): the clock goes with the lock call', async () => {
    const [a, b] = await replicas('clock-outdated');
    const [ca, cb] = [createCache({ store: a }), createCache({ store: b })];
    let gate: Promise<void> | undefined;
    let fills = 0;
    let running = 0;
    const fill = async () => {
      const n = ++fills;
      running++;
      if (gate !== undefined) await gate;
      return new LateTagged({ n }, ['User:1']);
    };
    expect(await lateLoad(ca, 'k', fill)).toEqual({ n: 1 });
    await cb.invalidateTags(['User:1']); // A's entry is there, outdated: A reads it with MGET, then locks
    const open = deferred<void>();
    gate = open.promise;
    running = 0;
    const second = lateLoad(ca, 'k', fill);
    await started(() => running);
    await cb.invalidateTags(['User:1']);
    open.resolve();
    expect(await second).toEqual({ n: 2 });
    gate = undefined;
    expect(await lateLoad(cb, 'k', fill)).toEqual({ n: 3 }); // n: 2 was not stored
    expect(await lateLoad(ca, 'k', fill)).toEqual({ n: 3 });
  });

  it('without the fill lock (lock: false): the fill reads the clock itself before it starts', async () => {
    const [a, b] = await replicas('clock-unlocked');
    const [ca, cb] = [createCache({ store: a }), createCache({ store: b })];
    const gate = deferred<void>();
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(ca, 'k', fill, false);
    await started(() => fills);
    await cb.invalidateTags(['User:1']);
    gate.resolve();
    expect(await first).toEqual({ n: 1 });
    expect(await lateLoad(cb, 'k', fill, false)).toEqual({ n: 2 });
    expect(await lateLoad(ca, 'k', fill, false)).toEqual({ n: 2 });
  });

  it('tieredStore, B’s message lost (its publish fails): A does not hear it, the clock keeps the value out of both tiers', async () => {
    const prefix = randomPrefix('clock-tiered');
    const [l2a, l2b] = [redisStore({ client: await client(), prefix }), redisStore({ client: await client(), prefix })];
    const controlled = controllableL2(l2b);
    const a = tieredStore({ l2: l2a, subscriber: await client() });
    const b = tieredStore({ l2: controlled.wrapped, subscriber: await client() });
    const [ca, cb] = [createCache({ store: a }), createCache({ store: b })];
    try {
      const gate = deferred<void>();
      let fills = 0;
      const fill = async () => {
        const n = ++fills;
        if (n === 1) await gate.promise;
        return new LateTagged({ n }, ['User:1']);
      };
      const first = lateLoad(ca, 'k', fill);
      await started(() => fills);
      controlled.control.failPublish = true;
      await cb.invalidateTags(['User:1']);
      gate.resolve();
      expect(await first).toEqual({ n: 1 });
      expect(await lateLoad(ca, 'k', fill)).toEqual({ n: 2 }); // not in A's L1, nor in Redis
      // B's invalidation failed as a whole (its publish): B reads nothing tagged User:1 until its
      // retry is taken (core/unsent), so it may fill once more; never the value that predates it.
      const onB = (await lateLoad(cb, 'k', fill)) as { n: number };
      expect(onB.n).toBeGreaterThanOrEqual(2);
      expect(fills).toBe(onB.n);
    } finally {
      await Promise.all([ca.close(), cb.close()]);
    }
  });
});

describe('round trips before a late-tagged fill starts: the clock read adds none', () => {
  /**
   * The client's socket as a sequence of rounds: writes sent before the previous ones were answered
   * belong to the same round. Returns the rounds so far when asked (at the fill's start).
   */
  const rounds = (redis: Redis) => {
    const stream = (redis as unknown as { stream: NodeJS.ReadWriteStream & { write: (...args: unknown[]) => boolean } })
      .stream;
    const original = stream.write;
    let count = 0;
    let answered = true;
    const onData = () => (answered = true);
    stream.on('data', onData);
    stream.write = function (this: unknown, ...args: unknown[]) {
      if (answered) count++;
      answered = false;
      return original.apply(this, args);
    };
    return {
      get count() {
        return count;
      },
      stop() {
        stream.write = original;
        stream.removeListener('data', onData);
      },
    };
  };

  it.each([
    ['cold: the read takes the lock, the clock read beside it', false, 1],
    [
      "present but outdated by its tags: the read, its tags' versions, the lock call with the clock read beside it, the re-check's tags' versions",
      true,
      4,
    ],
  ])('%s', async (_, outdated, expected) => {
    const prefix = randomPrefix('clock-rounds');
    const redis = await client();
    const store = redisStore({ client: redis, prefix });
    const cache = createCache({ store });
    await cache.invalidateTags(['warm']); // scripts go as EVAL once per connection, EVALSHA after
    await store.tagClock();
    await store.lock.acquire(['warm'], 'w', 1000);
    await store.lock.release(['warm'], 'w');
    (await store.lock.readOrAcquire(['warm:2'], [true], 'w', 1000)).watch?.close();
    await store.lock.release(['warm:2'], 'w');
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
    if (outdated) {
      await lateLoad(cache, 'k', fill);
      await cache.invalidateTags(['User:1']);
    }
    const socket = rounds(redis);
    let before = -1;
    try {
      await lateLoad(cache, 'k', () => ((before = socket.count), fill()));
    } finally {
      socket.stop();
    }
    expect(before).toBe(expected);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: outdated ? 2 : 1 }); // stored: a hit
  });

  it('tieredStore, cold: the L2 read takes the lock, the clock read beside it (1 round, as on Redis)', async () => {
    const prefix = randomPrefix('clock-rounds-tiered');
    const redis = await client();
    const l2 = redisStore({ client: redis, prefix });
    const store = tieredStore({ l2, subscriber: await client() });
    const cache = createCache({ store });
    await cache.invalidateTags(['warm']); // scripts go as EVAL once per connection, EVALSHA after
    await l2.tagClock();
    (await l2.lock.readOrAcquire(['warm:2'], [true], 'w', 1000, true)).watch?.close();
    await l2.lock.release(['warm:2'], 'w');
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
    const socket = rounds(redis);
    let before = -1;
    try {
      await lateLoad(cache, 'k', () => ((before = socket.count), fill()));
    } finally {
      socket.stop();
    }
    expect(before).toBe(1);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 }); // stored: a hit
    await store.close();
  });
});

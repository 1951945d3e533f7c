/**
 * The pipeline's read that also tries the locks of keys it finds missing (FillLock.readOrAcquire,
 * src/redis/read-or-lock.ts): a cold key's filler starts after ONE call, and a replica that finds
 * the key held is registered as its waiter by that same call. Counted on a server of this file's
 * own (INFO deltas, socket writes, script calls), never timed.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { deferred } from '../helpers';
import { commandCalls, countSocketWrites, delta, eventually, ownServer, stuckClock, within } from './helpers';

const own = ownServer();

type Commands = Record<string, (...args: unknown[]) => Promise<unknown>>;

/** Counts the calls of one of the client's script commands (as the store sends them). */
function spy(client: Redis, name: string): { readonly calls: number } {
  const commands = client as unknown as Commands;
  const original = commands[name]!;
  const counter = { calls: 0 };
  commands[name] = function (this: unknown, ...args: unknown[]) {
    counter.calls++;
    return original.apply(commands, args);
  };
  return counter;
}

/** The scripts go as EVAL the first time on a connection, EVALSHA after: sent once before any count. */
async function warm(store: RedisStore): Promise<void> {
  (await store.lock.readOrAcquire(['warm'], [true], 'w', 1000)).watch?.close();
  await store.lock.acquire(['warm'], 'w', 1000);
  await store.lock.release(['warm'], 'w');
  await store.lock.acquire(['warm'], 'w', 1000);
  await store.lock.writeAndRelease([{ key: 'warm', entry: { value: 0, freshUntil: 0, staleUntil: 0 }, ttl: 1 }], 'w');
}

/** A replica that waits: its own subscriber (subscribed before the test), sleeps that never end. */
async function waiter(prefix: string): Promise<{ store: RedisStore; cache: Cache; subscriber: Redis }> {
  const subscriber = await own.connection();
  const store = redisStore({ client: await own.connection(), prefix, subscriber });
  await warm(store);
  const cache = createCache({
    store,
    ttl: 60_000,
    clock: stuckClock(),
    lockPollInterval: 10_000,
    lockWaitTimeout: 60_000,
  });
  expect(await eventually(() => store.waitStats().channels === 1, 5000, 2)).toBe(true);
  return { store, cache, subscriber };
}

it('a cold key: its fill starts after one call, the read that takes its lock (not a read, then a lock call)', async () => {
  const client = await own.connection();
  const store = redisStore({ client, prefix: 'one:', subscriber: false });
  await warm(store);
  const cache = createCache({ store, ttl: 60_000 });
  const acquire = spy(client, 'herdcacheLockAcquire3');
  const before = await commandCalls(own.admin);
  const socket = countSocketWrites(client);
  let writesAtFill = -1;
  let commandsAtFill: Record<string, number> = {};
  const value = await cache.getOrCompute('cold', async () => {
    writesAtFill = socket.count;
    commandsAtFill = delta(before, await commandCalls(own.admin));
    return 'v';
  });
  socket.stop();
  expect(value).toBe('v');
  expect(writesAtFill).toBe(1);
  // One script: the value's GET (missing), then its lock's SET NX PX (won). No MGET, no acquire.
  expect(commandsAtFill).toEqual({ evalsha: 1, get: 1, set: 1 });
  expect(acquire.calls).toBe(0);
  expect(cache.metrics().total).toMatchObject({ misses: 1, fills: 1, lockAcquired: 1 });
  expect(await own.admin.get('one:{cold}')).not.toBeNull();
  expect(await own.admin.exists('one:{cold}:lock')).toBe(0);
});

it('keys this store read present are read with one MGET (no script on a warm hit); a key deleted here is tried again', async () => {
  const client = await own.connection();
  const store = redisStore({ client, prefix: 'warm:', subscriber: false });
  await warm(store);
  const cache = createCache({ store, ttl: 60_000 });
  const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
  const round = () => Promise.all(keys.map((key) => cache.getOrCompute(key, async () => key)));
  let before = await commandCalls(own.admin);
  expect(await round()).toEqual(keys);
  // Cold: one read that tried (and won) the 100 locks, one fenced write.
  expect(delta(before, await commandCalls(own.admin))).toMatchObject({ evalsha: 2 });
  before = await commandCalls(own.admin);
  const socket = countSocketWrites(client);
  expect(await round()).toEqual(keys);
  socket.stop();
  expect(delta(before, await commandCalls(own.admin))).toEqual({ mget: 1 });
  expect(socket.count).toBe(1);
  await cache.invalidate('k7');
  before = await commandCalls(own.admin);
  expect(await round()).toEqual(keys);
  // 99 by MGET; k7, deleted here, by the script that locks it (then its fenced write).
  expect(delta(before, await commandCalls(own.admin))).toMatchObject({ mget: 1, evalsha: 2 });
  expect(cache.metrics().total).toMatchObject({ fills: 101, lockAcquired: 101, hits: 199 });
});

it('a replica that finds the key held is registered as its waiter by the read, and woken by the write', async () => {
  const prefix = 'held:';
  const holder = createCache({ store: redisStore({ client: await own.connection(), prefix }), ttl: 60_000 });
  const { store, cache } = await waiter(prefix);
  const acquire = spy(store.client as Redis, 'herdcacheLockAcquire3');
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  let fills = 0;
  const waited = cache.getOrCompute('k', async () => (fills++, 'by-waiter'));
  expect(await eventually(async () => (await own.admin.get(`${prefix}{k}:waiters`)) !== null, 5000, 2)).toBe(true);
  expect(acquire.calls).toBe(0);
  gate.resolve('by-holder');
  // Its poll sleeps never end: only the announcement can answer it (with the value it carries).
  expect(await within(waited, 5000, 'the waiter woken by the write')).toBe('by-holder');
  expect(await held).toBe('by-holder');
  expect(fills).toBe(0);
  expect(acquire.calls).toBe(0);
  expect(store.waitStats()).toMatchObject({ woken: 1, polled: 0 });
  expect(cache.metrics().total).toMatchObject({ misses: 1, lockContended: 1, fills: 0 });
  await cache.close();
  await holder.close();
});

it('the watch is open before the read is sent: an announcement heard before the read is answered still wakes the waiter', async () => {
  const prefix = 'early:';
  const holder = createCache({ store: redisStore({ client: await own.connection(), prefix }), ttl: 60_000 });
  const { store, cache, subscriber } = await waiter(prefix);
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  // The read registers the waiter; its reply is held back until the holder has written and the
  // waiter's subscriber has delivered the announcement: the message comes first.
  const commands = store.client as unknown as Commands;
  const original = commands.herdcacheReadOrLock1!;
  commands.herdcacheReadOrLock1 = async (...args: unknown[]) => {
    const reply = await original.apply(commands, args);
    const heard = new Promise((resolve) => subscriber.once('messageBuffer', resolve));
    gate.resolve('by-holder');
    await heard;
    return reply;
  };
  const waited = cache.getOrCompute('k', async () => 'by-waiter');
  expect(await within(waited, 5000, 'the waiter answered by the early announcement')).toBe('by-holder');
  expect(await held).toBe('by-holder');
  expect(store.waitStats()).toMatchObject({ received: 1, polled: 0 });
  commands.herdcacheReadOrLock1 = original;
  await cache.close();
  await holder.close();
});

it('one fill per key fleet-wide: two caches on one prefix load 20 cold keys at once, 10 loads a key each', async () => {
  const prefix = 'fleet:';
  const caches = [0, 1].map(() => undefined);
  const replicas = await Promise.all(
    caches.map(async () => createCache({ store: redisStore({ client: await own.connection(), prefix }), ttl: 60_000 })),
  );
  const keys = Array.from({ length: 20 }, (_, i) => `f${i}`);
  const fills = new Map<string, number>();
  const fill = (key: string) => async () => {
    fills.set(key, (fills.get(key) ?? 0) + 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    return `v:${key}`;
  };
  const loads = replicas.flatMap((cache) =>
    keys.flatMap((key) => Array.from({ length: 10 }, () => cache.getOrCompute(key, fill(key)))),
  );
  const values = await Promise.all(loads);
  expect(new Set(values)).toEqual(new Set(keys.map((key) => `v:${key}`)));
  expect([...fills.values()].reduce((a, b) => a + b, 0)).toBe(keys.length);
  for (const cache of replicas) await cache.close();
});

it('a lock the read took for a load abandoned meanwhile is released at once, not left to its ttl', async () => {
  const prefix = 'left:';
  const store = redisStore({ client: await own.connection(), prefix, subscriber: false });
  await warm(store);
  const cache = createCache({ store, ttl: 60_000, lockTtl: 60_000 });
  const controller = new AbortController();
  const commands = store.client as unknown as Commands;
  const original = commands.herdcacheReadOrLock1!;
  commands.herdcacheReadOrLock1 = async (...args: unknown[]) => {
    const reply = await original.apply(commands, args);
    controller.abort(); // its only caller leaves while the read that won its lock is answered
    return reply;
  };
  let fills = 0;
  await expect(cache.getOrCompute('k', async () => (fills++, 'v'), { signal: controller.signal })).rejects.toThrow();
  commands.herdcacheReadOrLock1 = original;
  expect(await eventually(async () => (await own.admin.exists(`${prefix}{k}:lock`)) === 0, 5000, 5)).toBe(true);
  expect(fills).toBe(0);
  expect(cache.metrics().total.lockAcquired).toBe(1);
});

it('one dispatch with a cold key and a key present but invalidated by its tag: the read locks the first, one acquire the second', async () => {
  const client = await own.connection();
  const store = redisStore({ client, prefix: 'mixed:', subscriber: false });
  await warm(store);
  const cache = createCache({ store, ttl: 60_000 });
  expect(await cache.getOrCompute('tagged', async () => 'old', { tags: ['T'] })).toBe('old');
  await cache.invalidateTags(['T']);
  const readOrLock = spy(client, 'herdcacheReadOrLock1');
  const acquire = spy(client, 'herdcacheLockAcquire3');
  const [tagged, cold] = await Promise.all([
    cache.getOrCompute('tagged', async () => 'new', { tags: ['T'] }),
    cache.getOrCompute('cold', async () => 'cold'),
  ]);
  expect([tagged, cold]).toEqual(['new', 'cold']);
  expect([readOrLock.calls, acquire.calls]).toEqual([1, 1]);
  expect(cache.metrics().total).toMatchObject({ fills: 3, lockAcquired: 3 });
  expect(await cache.getOrCompute('tagged', async () => 'again', { tags: ['T'] })).toBe('new');
});

/**
 * Waiters woken when the value lands: a replica waiting on another's fill lock hears the holder's
 * fenced write (or its release) announced on pub/sub and reads the value at once, instead of after
 * its poll backoff. The waiters here run on a clock whose poll sleeps never end: without the
 * announcement they would never be answered, so each test fails (times out, named) without it.
 * Polling stays the fallback: a lost message or a dead subscriber costs the backoff, counted.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { manualClock, type Clock } from '../../src/core/freshness';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { tieredStore } from '../../src/redis/tiered';
import { deferred } from '../helpers';
import { connect, eventually, randomPrefix, stuckClock, within } from './helpers';

const connections: Redis[] = [];
async function connection(): Promise<Redis> {
  const client = await connect();
  connections.push(client);
  return client;
}

afterAll(async () => {
  for (const client of connections) if (client.status !== 'end') client.disconnect();
});

interface Pair {
  holder: Cache;
  waiter: Cache;
  waiterStore: RedisStore;
  subscriber: Redis;
}

/** A holder replica (no subscriber: announcing needs none) and a waiter replica that listens. */
async function pair(prefix: string, waiterClock: Clock, lockWaitTimeout = 60_000): Promise<Pair> {
  const holder = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  const client = await connection();
  const subscriber = await connection();
  const waiterStore = redisStore({ client, prefix, subscriber });
  const waiter = createCache({
    store: waiterStore,
    ttl: 60_000,
    clock: waiterClock,
    lockPollInterval: 10_000,
    lockWaitTimeout,
  });
  expect(await eventually(() => waiterStore.waitStats().channels === 1, 5000, 2)).toBe(true);
  return { holder, waiter, waiterStore, subscriber };
}

/** Starts the holder's fill of `key` (held until `gate`), then the waiter's load, contended. */
async function contend(p: Pair, key: string, holderFill: () => Promise<string>) {
  const filling = deferred<void>();
  const held = p.holder.getOrCompute(key, async () => {
    filling.resolve();
    return holderFill();
  });
  await filling.promise;
  let waiterFills = 0;
  const waited = p.waiter.getOrCompute(key, async () => {
    waiterFills++;
    return 'filled-by-waiter';
  });
  expect(await eventually(() => p.waiter.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  return { held, waited, waiterFills: () => waiterFills };
}

it("the holder's fenced write wakes the waiter, which reads the value without finishing a poll sleep", async () => {
  const clock = stuckClock();
  const p = await pair(randomPrefix('wake-write'), clock);
  const gate = deferred<string>();
  const run = await contend(p, 'k', () => gate.promise);
  expect(clock.sleeps).toEqual([10_000]); // waiting, on a sleep that never ends
  gate.resolve('filled-by-holder');
  expect(await run.held).toBe('filled-by-holder');
  expect(await within(run.waited, 5000, 'the waiter answered by the announcement')).toBe('filled-by-holder');
  expect(run.waiterFills()).toBe(0);
  expect(p.waiterStore.waitStats()).toMatchObject({ enabled: true, woken: 1, polled: 0, deaf: 0, received: 1 });
  expect(clock.sleeps).toEqual([10_000]);
  await p.waiter.close();
});

it('a release without a write (the fill failed) wakes the waiter, which takes the lock and fills at once', async () => {
  const clock = stuckClock();
  const p = await pair(randomPrefix('wake-release'), clock);
  const gate = deferred<string>();
  const run = await contend(p, 'k', () => gate.promise);
  gate.reject(new Error('the database is down'));
  await expect(run.held).rejects.toThrow('the database is down');
  expect(await within(run.waited, 5000, 'the waiter woken by the release')).toBe('filled-by-waiter');
  expect(run.waiterFills()).toBe(1);
  expect(p.waiterStore.waitStats()).toMatchObject({ woken: 1, polled: 0 });
  expect(p.waiter.metrics().total).toMatchObject({ lockContended: 1, lockAcquired: 1, lockTimeouts: 0 });
  await p.waiter.close();
});

it('a lost announcement costs a poll, never the answer: the waiter polls and is answered (counted as polled)', async () => {
  // A clock whose sleeps end at once (virtual time): the waiter polls in a loop until the value lands.
  const clock = manualClock(Date.now());
  const p = await pair(randomPrefix('wake-lost'), clock, 10 * 60_000);
  // Unsubscribed behind the store's back: it believes it listens, and every announcement is lost.
  await p.subscriber.unsubscribe();
  const gate = deferred<string>();
  const run = await contend(p, 'k', () => gate.promise);
  gate.resolve('filled-by-holder');
  expect(await within(run.waited, 5000, 'the polling waiter')).toBe('filled-by-holder');
  const stats = p.waiterStore.waitStats();
  expect(stats.woken).toBe(0);
  expect(stats.polled).toBeGreaterThanOrEqual(1);
  expect(run.waiterFills()).toBe(0);
  await p.waiter.close();
});

it('a dead subscriber: waits are counted deaf and polled, and still answered', async () => {
  const clock = manualClock(Date.now());
  const p = await pair(randomPrefix('wake-dead'), clock, 10 * 60_000);
  p.subscriber.disconnect();
  expect(await eventually(() => !p.waiterStore.waitStats().listening, 5000, 2)).toBe(true);
  const gate = deferred<string>();
  const run = await contend(p, 'k', () => gate.promise);
  gate.resolve('filled-by-holder');
  expect(await within(run.waited, 5000, 'the deaf waiter')).toBe('filled-by-holder');
  const stats = p.waiterStore.waitStats();
  expect(stats.deaf).toBeGreaterThanOrEqual(1);
  expect(stats.polled).toBeGreaterThanOrEqual(1);
  expect(stats.woken).toBe(0);
  await p.waiter.close();
});

it('through a tieredStore: its L2 subscriber (shared with the tier) wakes the waiter too', async () => {
  const clock = stuckClock();
  const prefix = randomPrefix('wake-tiered');
  const holder = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  const subscriber = await connection();
  const l2 = redisStore({ client: await connection(), prefix, subscriber });
  const tiered = tieredStore({ l2, subscriber });
  const waiter = createCache({ store: tiered, ttl: 60_000, clock, lockPollInterval: 10_000, lockWaitTimeout: 60_000 });
  expect(await eventually(() => l2.waitStats().channels === 1 && tiered.subscribed, 5000, 2)).toBe(true);
  const gate = deferred<string>();
  const run = await contend({ holder, waiter, waiterStore: l2, subscriber }, 'k', () => gate.promise);
  gate.resolve('filled-by-holder');
  expect(await within(run.waited, 5000, 'the tiered waiter answered by the announcement')).toBe('filled-by-holder');
  expect(l2.waitStats()).toMatchObject({ woken: 1, polled: 0 });
  await waiter.close();
  // Closing the tier unsubscribed both: the shared connection is left open (it is the user's).
  expect(l2.waitStats().channels).toBe(0);
  expect(subscriber.status).toBe('ready');
});

it('subscriber: false: the store offers no watch, waiters poll as before', async () => {
  const store = redisStore({ client: await connection(), prefix: randomPrefix('wake-none'), subscriber: false });
  expect(store.lock.watch).toBeUndefined();
  expect(store.waitStats()).toMatchObject({ enabled: false, woken: 0, polled: 0 });
});

it('rejects a subscriber that cannot serve: the client itself, or another keyPrefix', async () => {
  const client = await connection();
  expect(() => redisStore({ client, subscriber: client })).toThrow(
    expect.objectContaining({ code: 'E_INVALID_OPTION', message: expect.stringContaining('"subscriber"') }),
  );
  const other = await connect(undefined, { keyPrefix: 'elsewhere:' });
  connections.push(other);
  expect(() => redisStore({ client, subscriber: other })).toThrow(/keyPrefix/);
  expect(() => redisStore({ client, subscriber: {} as Redis })).toThrow(/"subscriber"/);
});

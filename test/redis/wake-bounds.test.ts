/**
 * Who registers as a waiter of a key, and how many: a background refresh that meets another
 * process's lock serves the value it finds and waits for nothing, so it is not registered and the
 * holder's write sends it no message; and a key's marker holds at most WAITERS_MAX_BYTES of ids,
 * however many processes wait on it (the others learn of the write by their poll). Counted on a
 * server of this file's own (INFO commandstats, messages on each subscriber connection), never timed.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { WAITERS_MAX_BYTES } from '../../src/redis/scripts';
import { deferred } from '../helpers';
import { commandCalls, delta, entry, eventually, ownServer, stuckClock, within } from './helpers';

const own = ownServer();
const connection = (): Promise<Redis> => own.connection();

beforeAll(async () => {
  // The scripts' first calls on this server answer NOSCRIPT, then go as EVAL: not in the counts.
  const warm = createCache({ store: redisStore({ client: await connection(), prefix: 'warm:' }), ttl: 60_000 });
  await warm.getOrCompute('w', async () => 1);
  await warm.close();
});

/** A store that listens (its subscriber subscribed), and the messages that connection received. */
async function listening(prefix: string) {
  const subscriber = await connection();
  let messages = 0;
  subscriber.on('message', () => messages++);
  const store = redisStore({ client: await connection(), prefix, subscriber });
  expect(await eventually(() => store.waitStats().channels === 1, 5000, 2)).toBe(true);
  return { store, messages: () => messages };
}

/** Another process holding `key`'s lock while its fill waits on the returned gate. */
async function holding(prefix: string, key: string) {
  const holder = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute(key, async () => (filling.resolve(), gate.promise));
  await filling.promise;
  return { holder, gate, held };
}

it('a background refresh that meets another process lock serves the stale value, is not registered, and gets no message', async () => {
  const prefix = 'br:';
  const { store, messages } = await listening(prefix);
  // Another process refreshes 'k' (its lock held), stale (past freshUntil) but still served
  // (before staleUntil): a load here answers it and starts a refresh of its own.
  const { holder, gate, held } = await holding(prefix, 'k');
  await store.setMany([{ key: 'k', entry: entry('old', Date.now() - 1000, Date.now() + 60_000), ttl: 60_000 }]);
  let refills = 0;
  const cache = createCache({ store, ttl: 60_000, swr: 60_000, clock: stuckClock(), lockWaitTimeout: 60_000 });
  expect(await cache.getOrCompute('k', async () => (refills++, 'refilled'))).toBe('old');
  // The refresh tried the lock, found it held and the stale value there: it keeps serving that.
  expect(await eventually(() => cache.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  expect(cache.metrics().total).toMatchObject({ refreshes: 1, staleServed: 1 });
  expect(await own.admin.exists(`${prefix}{k}:waiters`)).toBe(0);

  const before = await commandCalls(own.admin);
  gate.resolve('new');
  expect(await held).toBe('new');
  expect(await eventually(async () => (await own.admin.get(`${prefix}{k}:lock`)) === null, 5000, 2)).toBe(true);
  expect(delta(before, await commandCalls(own.admin)).publish ?? 0).toBe(0);
  expect(messages()).toBe(0);
  expect(store.waitStats()).toMatchObject({ received: 0, woken: 0 });
  expect(refills).toBe(0);
  await cache.close();
  await holder.close();
});

it('a background refresh that finds the key gone under another lock still registers and is woken by the write', async () => {
  const prefix = 'bg:';
  const { store, messages } = await listening(prefix);
  const { holder, gate, held } = await holding(prefix, 'k');
  await store.setMany([{ key: 'k', entry: entry('old', Date.now() - 1000, Date.now() + 60_000), ttl: 60_000 }]);
  // The read finds it stale (a refresh starts); the value is gone before the refresh tries the lock.
  const client = store.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const acquire = client.herdcacheLockAcquire3!;
  let marker: string | null = null;
  client.herdcacheLockAcquire3 = async (...args: unknown[]) => {
    await own.admin.del(`${prefix}{k}`);
    const reply = await acquire.apply(client, args);
    marker = await own.admin.get(`${prefix}{k}:waiters`);
    return reply;
  };
  const cache = createCache({ store, ttl: 60_000, swr: 60_000, clock: stuckClock(), lockWaitTimeout: 60_000 });
  expect(await cache.getOrCompute('k', async () => 'refilled')).toBe('old');
  expect(await eventually(() => cache.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  expect(marker).toMatch(/^[0-9a-f]+\+$/); // this process, alone
  gate.resolve('new');
  expect(await held).toBe('new');
  // Woken by the message (its poll sleeps never end), and answered from it.
  expect(await eventually(() => store.waitStats().woken === 1, 5000, 2)).toBe(true);
  expect(messages()).toBe(1);
  client.herdcacheLockAcquire3 = acquire;
  await cache.close();
  await holder.close();
});

it('a key waited on by more processes than its marker holds keeps the marker bounded; the write tells those registered only', async () => {
  const prefix = 'wm:';
  const client = (await connection()) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const store = redisStore({ client: client as unknown as Redis, prefix }); // defines the scripts
  await own.admin.set(`${prefix}{k}:lock`, 'holder', 'PX', 60_000);
  // 1,000 distinct processes attempt the held lock, each twice: ids of the store's form (13 bytes).
  const ids = Array.from({ length: 1000 }, (_, i) => `${i.toString(16).padStart(12, '0')}+`);
  for (const round of [0, 1])
    for (const id of ids) {
      const reply = (await client.herdcacheLockAcquire3!(
        2,
        `${prefix}{k}`,
        `${prefix}{k}:lock`,
        `t${round}`,
        60_000,
        id,
      )) as unknown[];
      expect(reply[0]).toBe('holder');
    }
  const marker = (await own.admin.get(`${prefix}{k}:waiters`))!;
  expect(marker.length).toBeLessThanOrEqual(WAITERS_MAX_BYTES);
  const registered = marker.split(' ');
  // Each registered once, the first to come, as many as fit.
  expect(registered).toEqual(ids.slice(0, registered.length));
  expect(registered.length).toBe(Math.floor((WAITERS_MAX_BYTES + 1) / 14));

  const before = await commandCalls(own.admin);
  await store.lock.release(['k'], 'nobody'); // not its lock: nothing happens
  await own.admin.set(`${prefix}{k}:lock`, 'mine', 'PX', 60_000);
  const landed = await store.lock.writeAndRelease([{ key: 'k', entry: entry('v'), ttl: 60_000 }], 'mine');
  expect(landed).toEqual([true]);
  expect(delta(before, await commandCalls(own.admin)).publish).toBe(registered.length);
  expect(await own.admin.exists(`${prefix}{k}:waiters`)).toBe(0);
});

it('a process that finds the marker full still gets the value, by its poll', async () => {
  const prefix = 'wf:';
  const { store, messages } = await listening(prefix);
  const { holder, gate, held } = await holding(prefix, 'k');
  const full = Array.from({ length: 400 }, (_, i) => `${i.toString(16).padStart(12, '0')}+`).join(' ');
  await own.admin.set(`${prefix}{k}:waiters`, full.slice(0, full.lastIndexOf(' ', WAITERS_MAX_BYTES)), 'PX', 60_000);
  const marker = await own.admin.get(`${prefix}{k}:waiters`);
  let polls = 0;
  let release: (() => void) | undefined;
  const cache = createCache({
    store,
    ttl: 60_000,
    lockWaitTimeout: 60_000,
    // Polls end when the test says so: the write first, then the poll that reads it.
    clock: { now: () => Date.now(), sleep: () => (polls++, new Promise<void>((resolve) => (release = resolve))) },
  });
  const waited = cache.getOrCompute('k', async () => 'by-waiter');
  expect(await eventually(() => cache.metrics().total.lockContended === 1 && release !== undefined, 5000, 2)).toBe(
    true,
  );
  expect(await own.admin.get(`${prefix}{k}:waiters`)).toBe(marker); // not added: full
  gate.resolve('by-holder');
  expect(await held).toBe('by-holder');
  expect(await eventually(async () => (await own.admin.get(`${prefix}{k}:lock`)) === null, 5000, 2)).toBe(true);
  release!();
  expect(await within(waited, 5000, 'the waiter answered by its poll')).toBe('by-holder');
  expect(messages()).toBe(0);
  expect(store.waitStats()).toMatchObject({ received: 0, woken: 0, polled: 1 });
  expect(polls).toBe(1);
  await cache.close();
  await holder.close();
});

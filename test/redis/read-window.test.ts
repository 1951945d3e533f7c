/**
 * A caller that comes while its key's store read is under way does not take that read's answer:
 * the read was sent before it came, and an invalidation on another replica that returned before
 * it came may have reached Redis after the read, which then found the older value. It waits for
 * the read's end, then joins the flight if it goes on to fill (one fill still), else reads the
 * store itself. The callers that came before the read was sent take its answer. Against a real
 * redis-server; two caches on one store prefix are two replicas; a read's reply is held (it came
 * back from Redis, not handed over yet) while the other replica invalidates.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core';
import type { Store } from '../../src/core/store';
import { redisStore } from '../../src/redis/redis-store';
import { connect, eventually, randomPrefix } from './helpers';

let client: Redis;
const caches: Cache[] = [];

beforeAll(async () => {
  client = await connect();
});

afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  await client.quit();
});

interface Hold {
  next?: () => Promise<void>;
  /** Which reply to hold (default: the next one). */
  when?: (reply: unknown) => boolean;
  held: number;
}

/**
 * A store whose read replies (getMany, the read that tries the lock, lock attempts) wait, once
 * each time `hold.next` is set, for that function before they are handed back.
 */
function heldStore(prefix: string, subscriber = true): { store: Store; hold: Hold } {
  const store = redisStore({ client, prefix, commandTimeout: 10_000, ...(subscriber ? {} : { subscriber: false }) });
  const hold: Hold = { held: 0 };
  const held =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const reply = await call(...args);
      const next = hold.next;
      if (next === undefined || (hold.when !== undefined && !hold.when(reply))) return reply;
      hold.next = undefined;
      if (next !== undefined) {
        hold.held++;
        await next();
      }
      return reply;
    };
  store.getMany = held(store.getMany.bind(store));
  const lock = store.lock!;
  lock.acquire = held(lock.acquire.bind(lock));
  if (lock.readOrAcquire !== undefined) lock.readOrAcquire = held(lock.readOrAcquire.bind(lock));
  return { store, hold };
}

function replica(store: Store, options: Parameters<typeof createCache>[0] = {}): Cache {
  const cache = createCache({ store, ttl: 60_000, ...options });
  caches.push(cache);
  return cache;
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

/**
 * A fill returning `{ version }` as read when it starts; its first call (the lock holder's) waits
 * for `open()` after reading it. `state.version`: the data's version from now on.
 */
function gatedFill() {
  const state = { version: 1, fills: 0 };
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const fill = async () => {
    const call = ++state.fills;
    const value = { version: state.version };
    if (call === 1) await gate;
    return value;
  };
  return { fill, open, state };
}

describe.each([
  ['invalidateTags', true],
  ['invalidate', false],
])('a caller coming during a read under way, after another replica’s %s returned', (_name, tagged) => {
  it('gets the value written after that invalidation, not the one the read found', async () => {
    const prefix = randomPrefix('read-window');
    const { store, hold } = heldStore(prefix);
    const a = replica(store);
    const b = replica(redisStore({ client, prefix }));
    const options = tagged ? { tags: ['Item:1'] } : {};
    let version = 1;
    let fills = 0;
    const fill = () => {
      fills++;
      return Promise.resolve({ version });
    };
    expect(await b.getOrCompute('item:1', fill, options)).toEqual({ version: 1 }); // stored by the other replica
    let late: Promise<unknown> | undefined;
    hold.next = async () => {
      // The read's reply is back; the other replica's write and its invalidation return; then a caller comes.
      version = 2;
      if (tagged) await b.invalidateTags(['Item:1']);
      else await b.invalidate('item:1');
      late = a.getOrCompute('item:1', fill, options);
      await tick();
    };
    const early = await a.getOrCompute('item:1', fill, options);
    expect(hold.held).toBe(1);
    expect(early).toEqual({ version: 1 }); // it came before the invalidation: the stored value is its answer
    expect(await late).toEqual({ version: 2 });
    expect(fills).toBe(2);
    expect(a.metrics().total.coalesced).toBe(0);
  });
});

it('a caller coming during a cold read joins the fill that follows it: one fill', async () => {
  const prefix = randomPrefix('read-window-cold');
  const { store, hold } = heldStore(prefix);
  const a = replica(store);
  let fills = 0;
  const fill = () => {
    fills++;
    return Promise.resolve('v');
  };
  const late: Promise<unknown>[] = [];
  hold.next = async () => {
    for (let i = 0; i < 5; i++) late.push(a.getOrCompute('cold', fill));
    await tick();
  };
  expect(await a.getOrCompute('cold', fill)).toBe('v');
  expect(await Promise.all(late)).toEqual(['v', 'v', 'v', 'v', 'v']);
  expect(fills).toBe(1);
  expect(a.metrics().total).toMatchObject({ misses: 1, coalesced: 5 });
});

it('a caller coming during a lock wait’s poll does not take the value the poll found before an invalidation', async () => {
  const prefix = randomPrefix('read-window-lock');
  const { store, hold } = heldStore(prefix, false); // polls: no announcement of the holder's write
  const a = replica(store, { lockPollInterval: 20, lockWaitTimeout: 20_000 });
  const b = replica(redisStore({ client, prefix }));
  const c = replica(redisStore({ client, prefix }));
  const tags = ['Item:2'];
  const { fill, open, state } = gatedFill();
  const holder = b.getOrCompute('item:2', fill, { tags });
  expect(await eventually(() => state.fills === 1, 5_000)).toBe(true);
  const waiter = a.getOrCompute('item:2', fill, { tags });
  expect(await eventually(() => a.metrics().total.lockContended === 1, 5_000)).toBe(true);
  let late: Promise<unknown> | undefined;
  // The first poll whose reply carries b's write (a lock attempt's entry) is held.
  hold.when = (reply) => Array.isArray(reply) && reply.some((attempt) => attempt?.entry !== undefined);
  hold.next = async () => {
    // This poll's reply carries b's write; c's invalidation returns, then a caller comes to a.
    state.version = 2;
    await c.invalidateTags(tags);
    late = a.getOrCompute('item:2', fill, { tags });
    await tick();
  };
  open();
  expect(await holder).toEqual({ version: 1 });
  expect(await waiter).toEqual({ version: 1 }); // it came before the invalidation
  expect(hold.held).toBe(1);
  expect(await late).toEqual({ version: 2 });
});

/**
 * A replica waiting on another's fill lock whose wait the holder's announcement ends (it carries
 * the value written): a caller that joined the wait after a third replica's invalidate of the key
 * returned does not take that value, written before it; the wait reads again instead.
 */
it('a caller joining a lock wait after another replica’s invalidate returned does not take the value announced before it', async () => {
  const prefix = randomPrefix('read-window-announced');
  const store = redisStore({ client, prefix, commandTimeout: 10_000 });
  const hold: { wake?: () => Promise<void>; woken: number } = { woken: 0 };
  // The wake of a lock wait (the holder's announcement) is held while `hold.wake` runs.
  const lock = store.lock!;
  const heldWake = <W extends { wait(sleep: Promise<void>): Promise<void> } | undefined>(watch: W): W => {
    if (watch === undefined) return watch;
    const wait = watch.wait.bind(watch);
    watch.wait = async (sleep) => {
      await wait(sleep);
      const wake = hold.wake;
      hold.wake = undefined;
      if (wake !== undefined) {
        hold.woken++;
        await wake();
      }
    };
    return watch;
  };
  const watch = lock.watch!.bind(lock);
  lock.watch = (keys) => heldWake(watch(keys));
  const readOrAcquire = lock.readOrAcquire!.bind(lock);
  lock.readOrAcquire = async (...args: Parameters<typeof readOrAcquire>) => {
    const read = await readOrAcquire(...args);
    heldWake(read.watch);
    return read;
  };
  const a = replica(store, { lockPollInterval: 5_000, lockWaitTimeout: 20_000 });
  const holderReplica = replica(redisStore({ client, prefix }));
  const b = replica(redisStore({ client, prefix }));
  const { fill, open, state } = gatedFill();
  const holder = holderReplica.getOrCompute('item:3', fill);
  expect(await eventually(() => state.fills === 1, 5_000)).toBe(true);
  const waiter = a.getOrCompute('item:3', fill);
  expect(await eventually(() => a.metrics().total.lockContended === 1, 5_000)).toBe(true);
  let late: Promise<unknown> | undefined;
  hold.wake = async () => {
    // The holder wrote and announced; another replica's invalidate returns; then a caller joins the wait.
    state.version = 2;
    await b.invalidate('item:3');
    late = a.getOrCompute('item:3', fill);
    await tick();
  };
  open();
  expect(await holder).toEqual({ version: 1 });
  await waiter;
  expect(hold.woken).toBe(1);
  expect(await late).toEqual({ version: 2 });
});

/**
 * A tagged key's lock wait judges the holder's write by the tags' versions read before the wait. A
 * caller that joined the wait after another replica's invalidateTags returned is not given a value
 * computed before it (the holder's): the versions are read again first, and the wait fills anew.
 */
it('a caller joining a tagged key’s lock wait after another replica’s invalidateTags returned gets a value computed after it', async () => {
  const prefix = randomPrefix('read-window-tagged-wait');
  const a = replica(redisStore({ client, prefix, subscriber: false }), {
    lockPollInterval: 20,
    lockWaitTimeout: 20_000,
  });
  const holderReplica = replica(redisStore({ client, prefix }));
  const b = replica(redisStore({ client, prefix }));
  const tags = ['Item:4'];
  const { fill, open, state } = gatedFill();
  const holder = holderReplica.getOrCompute('item:4', fill, { tags });
  expect(await eventually(() => state.fills === 1, 5_000)).toBe(true);
  const waiter = a.getOrCompute('item:4', fill, { tags });
  expect(await eventually(() => a.metrics().total.lockContended === 1, 5_000)).toBe(true);
  state.version = 2;
  await b.invalidateTags(tags); // the write, then its invalidation, returned
  const late = a.getOrCompute('item:4', fill, { tags }); // joins the wait
  open();
  expect(await holder).toEqual({ version: 1 });
  expect(await late).toEqual({ version: 2 });
  expect(await waiter).toEqual({ version: 2 }); // the same flight: filled anew
  expect(state.fills).toBe(2);
});

it('a caller aborting while it waits for a read’s end leaves at once; the others are answered', async () => {
  const prefix = randomPrefix('read-window-abort');
  const { store, hold } = heldStore(prefix);
  const a = replica(store);
  const controller = new AbortController();
  let leaving: Promise<unknown> | undefined;
  let staying: Promise<unknown> | undefined;
  let released!: () => void;
  const release = new Promise<void>((resolve) => (released = resolve));
  hold.next = async () => {
    leaving = a.getOrCompute('k', () => Promise.resolve('v'), { signal: controller.signal });
    staying = a.getOrCompute('k', () => Promise.resolve('v'));
    controller.abort(new Error('left'));
    await expect(leaving).rejects.toThrow('left'); // while the read is still held
    released();
  };
  expect(await a.getOrCompute('k', () => Promise.resolve('v'))).toBe('v');
  await release;
  expect(await staying).toBe('v');
  // Each load counted once: the one that left as a caller of an abandoned flight is (a miss).
  const { hits, misses, coalesced, staleServed } = a.metrics().total;
  expect({ loads: hits + misses + coalesced + staleServed, misses }).toEqual({ loads: 3, misses: 2 });
});

/**
 * A fill whose every flight was abandoned (its callers all left) lets go of its fill lock at once,
 * not when its fill returns: a fill that ignores its signal (a hung database call) otherwise kept
 * the other replicas, and this one's next load, waiting out `lockWaitTimeout`. Against a real
 * redis-server; two caches on one store prefix are two replicas.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core';
import { redisStore } from '../../src/redis/redis-store';
import { connect, eventually, randomPrefix, within } from './helpers';

let client: Redis;
let prefix: string;
const caches: Cache[] = [];

beforeAll(async () => {
  client = await connect();
});

afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  await client.quit();
});

beforeEach(() => {
  prefix = randomPrefix('abandoned-lock');
});

/** A replica: its own cache on the shared store; a lock wait long enough that waiting it out fails the test. */
function replica(): Cache {
  const cache = createCache({
    store: redisStore({ client, prefix, commandTimeout: 10_000 }),
    ttl: 60_000,
    lockWaitTimeout: 60_000,
  });
  caches.push(cache);
  return cache;
}

const lockKey = (key: string): string => `${prefix}{${key}}:lock`;
/** A loader's key as the store holds it (`name:key`). */
const loaderLock = (name: string, key: string): string => lockKey(`${name}:${key}`);

/** Fills that never settle and never read their signal, counted. */
let hungCalls = 0;
const hung = (): Promise<string> => {
  hungCalls++;
  return new Promise<string>(() => {});
};

describe('an abandoned fill releases its lock', () => {
  it('when its last caller leaves: another replica fills at once, and so does this one', async () => {
    const a = replica();
    const b = replica();
    const controller = new AbortController();
    hungCalls = 0;
    const left = a.getOrCompute('k', hung, { signal: controller.signal }).catch((error: unknown) => error);
    expect(await eventually(() => hungCalls === 1, 5_000)).toBe(true); // the fill runs, under the lock
    expect(await client.exists(lockKey('k'))).toBe(1);
    controller.abort(new Error('client went away'));
    expect(await left).toMatchObject({ message: 'client went away' });
    expect(await eventually(async () => (await client.exists(lockKey('k'))) === 0, 5_000)).toBe(true); // released
    let fills = 0;
    const fill = async () => `v${++fills}`;
    expect(await within(b.getOrCompute('k', fill), 5_000, "the other replica's load")).toBe('v1');
    await a.invalidate('k');
    expect(await within(a.getOrCompute('k', fill), 5_000, "this replica's next load")).toBe('v2');
    expect(fills).toBe(2);
  });

  it('a batch: the locks of every key of the abandoned call go', async () => {
    const a = replica();
    const b = replica();
    let finish: ((values: string[]) => void) | undefined;
    const slow = a.loader({
      name: 'slow',
      batch: () =>
        new Promise<string[]>((resolve) => {
          finish = resolve;
        }),
    });
    const controller = new AbortController();
    const left = Promise.allSettled(['x', 'y'].map((key) => slow.load(key, { signal: controller.signal })));
    expect(await eventually(() => finish !== undefined, 5_000)).toBe(true); // the batch runs, under the locks
    expect(await client.exists(loaderLock('slow', 'x'), loaderLock('slow', 'y'))).toBe(2);
    controller.abort();
    await left;
    expect(
      await eventually(
        async () => (await client.exists(loaderLock('slow', 'x'), loaderLock('slow', 'y'))) === 0,
        5_000,
      ),
    ).toBe(true);
    const fast = b.loader({ name: 'slow', batch: async (keys) => keys.map((key) => `b:${key}`) });
    expect(await within(fast.loadMany(['x', 'y']), 5_000, "the other replica's loads")).toEqual(['b:x', 'b:y']);
    finish!(['a:x', 'a:y']); // returns at last, its callers gone: its own release (a no-op now) goes out
    await new Promise((resolve) => setImmediate(resolve));
    await client.ping(); // one connection, commands in order: that release was answered before this
  });
});

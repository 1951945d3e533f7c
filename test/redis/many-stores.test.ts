/**
 * Many stores on one ioredis client (and one subscriber connection) add one listener per event,
 * not one per store: 20 redisStores and 20 tieredStores stay under Node's 10-listener warning, work,
 * and leave no listener behind once closed.
 */
import Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { redisStore } from '../../src/redis/redis-store';
import { tieredStore } from '../../src/redis/tiered';
import { randomPrefix, redisUrl } from './helpers';

const EVENTS = ['ready', 'end', 'close', 'message'] as const;

function counts(connection: Redis): Record<string, number> {
  return Object.fromEntries(EVENTS.map((event) => [event, connection.listenerCount(event)]));
}

function added(connection: Redis, before: Record<string, number>): Record<string, number> {
  const now = counts(connection);
  return Object.fromEntries(EVENTS.map((event) => [event, now[event]! - before[event]!]));
}

let warnings: string[];
let spy: jest.SpyInstance;
beforeEach(() => {
  warnings = [];
  spy = jest.spyOn(process, 'emitWarning').mockImplementation(((warning: string | Error) => {
    warnings.push(typeof warning === 'string' ? warning : `${warning.name}: ${warning.message}`);
  }) as typeof process.emitWarning);
});
afterEach(() => spy.mockRestore());

it('20 redisStores and 20 tieredStores on one client and one subscriber: at most one listener per event each', async () => {
  // Not connected yet: each store's guard waits for the client's first 'ready'.
  const client = new Redis(redisUrl(), { lazyConnect: true });
  const subscriber = new Redis(redisUrl(), { lazyConnect: true });
  const onClient = counts(client);
  const onSubscriber = counts(subscriber);
  const prefix = randomPrefix('many');
  const caches: Cache[] = [];
  for (let i = 0; i < 20; i++) {
    // The default subscriber (the store's own, opened on its first wait) listens for the client's 'end'.
    caches.push(createCache({ store: redisStore({ client, prefix }), ttl: 60_000 }));
    caches.push(
      createCache({
        store: tieredStore({ l2: redisStore({ client, prefix, subscriber }), subscriber, l1: memoryStore() }),
        ttl: 60_000,
      }),
    );
  }
  // 'close': a guard hears a first attempt that failed (Redis down at start is not waited for).
  expect(added(client, onClient)).toEqual({ ready: 1, end: 1, close: 1, message: 0 });
  expect(added(subscriber, onSubscriber)).toEqual({ ready: 1, end: 1, close: 1, message: 1 });
  // They work: every store on the client answers from the one it shares.
  await client.connect();
  // The tiered stores' SUBSCRIBE started the subscriber already (lazyConnect connects on a first command).
  if (subscriber.status !== 'ready') await new Promise((resolve) => subscriber.once('ready', resolve));
  let fills = 0;
  for (const cache of caches) expect(await cache.getOrCompute('k', async () => ++fills)).toBe(1);
  expect(fills).toBe(1);
  expect(warnings.filter((warning) => warning.includes('MaxListenersExceeded'))).toEqual([]);
  await Promise.all(caches.map((cache) => cache.close()));
  // Closed: nothing of herdcache's is left on either connection.
  expect(added(client, onClient)).toEqual({ ready: 0, end: 0, close: 0, message: 0 });
  expect(added(subscriber, onSubscriber)).toEqual({ ready: 0, end: 0, close: 0, message: 0 });
  await client.unlink(`${prefix}{k}`);
  client.disconnect();
  subscriber.disconnect();
});

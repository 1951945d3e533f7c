/**
 * A replica that waited on another's fill lock reads its tags' versions again before it fills: the
 * versions it read before the wait may predate an invalidation made meanwhile. Before, the entry
 * the holder wrote after that invalidation (its fill abandoned and run again) looked stale to the
 * waiter, which filled once more and overwrote it with an entry recording the older versions:
 * outdated at once, so the next load filled again (4 fills where 2 do). Nothing stale was served.
 * Against a real redis-server; two caches on one store prefix are two replicas.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core';
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

/** A replica whose lock waits are woken by the holder's write only (its polls far apart). */
function replica(prefix: string): Cache {
  const cache = createCache({
    store: redisStore({ client, prefix, commandTimeout: 10_000 }),
    ttl: 60_000,
    lockPollInterval: 5_000,
    lockWaitTimeout: 20_000,
  });
  caches.push(cache);
  return cache;
}

it('a waiter takes the entry the holder wrote after an invalidation during the wait: no fill of its own', async () => {
  const prefix = randomPrefix('lock-wait-versions');
  const a = replica(prefix);
  const b = replica(prefix);
  const tags = ['Item:1'];
  let version = 1;
  let fills = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const fill = async () => {
    const call = ++fills;
    const value = { version };
    if (call === 1) await gate; // the first fill, under the lock, outlasts the invalidation
    return value;
  };
  const first = a.getOrCompute('item:1', fill, { tags });
  expect(await eventually(() => fills === 1, 5_000)).toBe(true);
  const waiting = b.getOrCompute('item:1', fill, { tags });
  expect(await eventually(() => b.metrics().total.lockContended === 1, 5_000)).toBe(true);
  version = 2;
  await a.invalidateTags(tags); // a's fill is abandoned: it fills again, and writes version 2
  const [mine, theirs] = await Promise.all([first, waiting]);
  open();
  expect(mine).toEqual({ version: 2 });
  expect(theirs).toEqual({ version: 2 });
  expect(fills).toBe(2); // a's two; b took a's write
  // What the store holds is current: neither replica fills again.
  expect(await b.getOrCompute('item:1', fill, { tags })).toEqual({ version: 2 });
  expect(await a.getOrCompute('item:1', fill, { tags })).toEqual({ version: 2 });
  expect(fills).toBe(2);
});

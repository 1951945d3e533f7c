/**
 * A Cluster whose servers lack sharded pub/sub (SSUBSCRIBE and SPUBLISH renamed away, as on a
 * Redis before 7): the fenced writes still land (the script's SPUBLISH is a pcall), and a waiter
 * cannot subscribe, so it polls: each wait is counted deaf and polled, and it is still answered.
 */
import type { Cluster } from 'ioredis';
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { redisStore } from '../../src/redis/redis-store';
import { deferred } from '../helpers';
import { eventually } from './helpers';
import { startLocalCluster, type LocalCluster } from './local-cluster';

let local: LocalCluster;
const subscribers: Cluster[] = [];

beforeAll(async () => {
  local = await startLocalCluster('wake-unsupported', {
    extraArgs: ['--rename-command', 'SSUBSCRIBE', '', '--rename-command', 'SPUBLISH', ''],
  });
}, 60_000);

afterAll(async () => {
  for (const subscriber of subscribers) subscriber.disconnect();
  await local?.stop();
});

it('no sharded pub/sub: the write lands, the waiter polls (counted deaf and polled) and is answered', async () => {
  const prefix = 'wu:';
  // Patient stores: the test counts store errors, and a loaded machine can hold a reply past 250 ms.
  const holder = createCache({
    store: redisStore({ client: await local.client(), prefix, commandTimeout: 10_000 }),
    ttl: 60_000,
  });
  const client = await local.client();
  const subscriber = client.duplicate([], { shardedSubscribers: true });
  subscribers.push(subscriber);
  const waiterStore = redisStore({ client, prefix, subscriber, commandTimeout: 10_000 });
  const waiter = createCache({
    store: waiterStore,
    ttl: 60_000,
    clock: manualClock(Date.now()),
    lockWaitTimeout: 10 * 60_000,
  });
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => {
    filling.resolve();
    return gate.promise;
  });
  await filling.promise;
  const waited = waiter.getOrCompute('k', async () => 'filled-by-waiter');
  expect(await eventually(() => waiter.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  gate.resolve('filled-by-holder');
  expect(await held).toBe('filled-by-holder');
  expect(await waited).toBe('filled-by-holder');
  const stats = waiterStore.waitStats();
  expect(stats).toMatchObject({ woken: 0, channels: 0 });
  expect(stats.deaf).toBeGreaterThanOrEqual(1);
  expect(stats.polled).toBeGreaterThanOrEqual(1);
  expect(holder.metrics().total.storeErrors).toBe(0);
  expect(waiter.metrics().total).toMatchObject({ fills: 0, storeErrors: 0 });
  await waiter.close();
});

/**
 * A loader batch of 30,000 keys in one tick is one lock script for all of them: its budget grows
 * with its keys (1 ms per ~40 keys, see link.ts KEY_BUDGET_BYTES), so it is not timed out by a
 * command timeout made for one key and the fleet still fills each key once. Counted: fills and
 * store errors of two replicas loading the same 30,000 cold keys at once (with a plain 100 ms
 * budget, the lock call timed out and every key was filled twice).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

const clients: Redis[] = [];
afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit()));
});

it('two replicas load the same 30,000 cold keys in one tick each: one fill per key, no store error', async () => {
  const prefix = randomPrefix('huge-batch');
  let fills = 0;
  const batch = async (keys: readonly string[]) => {
    fills += keys.length;
    await new Promise((resolve) => setTimeout(resolve, 50));
    return keys.map((key) => `v${key}`);
  };
  const replicas = [];
  for (let i = 0; i < 2; i++) {
    const client = await connect();
    clients.push(client);
    const cache = createCache({ store: redisStore({ client, prefix, commandTimeout: 100 }), ttl: 60_000 });
    replicas.push({ cache, loader: cache.loader<string, string>({ name: 'u', batch, maxBatchSize: 100_000 }) });
  }
  const keys = Array.from({ length: 30_000 }, (_, i) => String(i));
  const answers = await Promise.all(replicas.map(({ loader }) => Promise.all(keys.map((key) => loader.load(key)))));
  for (const answer of answers) expect(answer).toEqual(keys.map((key) => `v${key}`));
  expect(fills).toBe(keys.length);
  expect(replicas.map(({ cache }) => cache.metrics().total.storeErrors)).toEqual([0, 0]);
  await Promise.all(replicas.map(({ cache }) => cache.close()));
}, 60_000);

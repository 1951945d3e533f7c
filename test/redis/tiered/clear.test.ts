import Redis from 'ioredis';
import { createCache } from '../../../src/core/cache';
import { memoryStore } from '../../../src/core/memory';
import { redisStore } from '../../../src/redis/redis-store';
import { tieredStore } from '../../../src/redis/tiered';
import { startRedisServer, type RedisServer } from '../../setup/redis-server';

let server: RedisServer;
const clients: Redis[] = [];
async function connect(): Promise<Redis> {
  const c = new Redis(server.url, { lazyConnect: true });
  clients.push(c);
  await c.connect();
  return c;
}
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server.stop();
});

async function tiered(prefix: string) {
  const client = await connect();
  const subscriber = await connect();
  const store = tieredStore({ l2: redisStore({ client, prefix }), subscriber, l1: memoryStore(), l1Ttl: 60_000 });
  for (let i = 0; i < 200 && !store.subscribed; i++) await new Promise((r) => setTimeout(r, 5));
  return store;
}

test('store: a read issued during clear() puts the cleared value back into L1, served after clear resolves', async () => {
  const store = await tiered('tc1:');
  const entry = { value: 'old', freshUntil: Date.now() + 60_000, staleUntil: Date.now() + 60_000 };
  await store.setMany([{ key: 'k', entry, ttl: 60_000 }]);
  const clearing = store.clear(); // L1 emptied now; SCAN sent
  const reading = store.getMany(['k']); // L1 miss → MGET, answered before the UNLINK
  await Promise.all([clearing, reading]);
  expect((await store.getMany(['k']))[0]).toBeUndefined(); // L2 is empty...
  await store.close();
});

test('registry: after `await cache.clear()` the same replica still serves the cleared value', async () => {
  const store = await tiered('tc2:');
  const cache = createCache({ store, ttl: 60_000 });
  expect(await cache.getOrCompute('k', () => 'old')).toBe('old');
  const clearing = cache.clear();
  const concurrent = store.getMany(['k']); // any concurrent read of the key (another request's miss)
  await Promise.all([clearing, concurrent]);
  expect(await cache.getOrCompute('k', () => 'new')).toBe('new');
  await cache.close();
});

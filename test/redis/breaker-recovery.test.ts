import Redis from 'ioredis';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { redisStore } from '../../src/redis/redis-store';

let server: RedisServer;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedisServer({ extraArgs: ['--enable-debug-command', 'yes'] });
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server.stop();
});

/**
 * A store whose breaker (threshold 1, coolDown 0) has opened once, Redis up: the next call is the
 * half-open trial. Opened by a stall (a reconnection would close it: the client's ready does).
 */
async function openedOnce(prefix: string) {
  const client = new Redis(server.url, { lazyConnect: true });
  clients.push(client);
  await client.connect();
  const store = redisStore({ client, prefix, commandTimeout: 50, breaker: { threshold: 1, coolDown: 0 } });
  // Same connection: the read is answered after the sleep, long after its timeout.
  const stall = client.call('DEBUG', 'SLEEP', '0.3');
  await expect(store.getMany(['a'])).rejects.toMatchObject({ code: 'E_STORE_TIMEOUT' });
  await stall;
  expect(store.breakerState).toBe('half-open');
  return store;
}

test('clear() in half-open: the trial is admitted twice, the 2nd admit throws, breaker never recovers', async () => {
  const store = await openedOnce('bk1:');
  await store.clear().catch(() => undefined); // the trial call
  await new Promise((r) => setTimeout(r, 20)); // coolDown is 0
  // Redis is healthy: the next call must be let through (as the next trial at least).
  await expect(store.getMany(['a'])).resolves.toEqual([undefined]);
});

test('setMany() of only unencodable values in half-open leaves the trial "in flight" forever', async () => {
  const store = await openedOnce('bk2:');
  await store.setMany([
    { key: 'big', entry: { value: 1n, freshUntil: Infinity, staleUntil: Infinity }, ttl: Infinity },
  ]);
  await new Promise((r) => setTimeout(r, 20));
  await expect(store.getMany(['a'])).resolves.toEqual([undefined]);
});

test('a client never ready (Redis down at start, or given closed): its first ready closes the breakers at once', async () => {
  const client = new Redis(server.url, { lazyConnect: true });
  clients.push(client);
  // A long cool-down: only the client's ready can close the breaker within this test.
  const store = redisStore({ client, prefix: 'bk3:', readyTimeout: 0, breaker: { threshold: 1, coolDown: 60_000 } });
  await expect(store.getMany(['a'])).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
  while (client.status !== 'ready') await new Promise((r) => setTimeout(r, 5));
  // Closed by the client's ready itself (emitted a tick after the status), before any call.
  expect(store.breakerState).toBe('closed');
  await expect(store.getMany(['a'])).resolves.toEqual([undefined]);
  expect(store.breakerState).toBe('closed');
});

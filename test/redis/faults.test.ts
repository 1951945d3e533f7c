/**
 * The cache must never be the outage: a slow Redis, a dead Redis, a Redis that was never there.
 * Each test runs its own redis-server so it can block it (DEBUG SLEEP), kill it and restart it
 * on the same port. Timing is asserted only where it is the point: "bounded", with wide margins.
 */
import { createServer } from 'node:net';
import Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { freePort, startRedisServer, type RedisServer } from '../setup/redis-server';
import { connect, entry, eventually, sleep } from './helpers';

const servers: RedisServer[] = [];
const clients: Redis[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
});

async function server(port?: number): Promise<RedisServer> {
  const started = await startRedisServer({ port, extraArgs: ['--enable-debug-command', 'yes'] });
  servers.push(started);
  return started;
}

/**
 * Reconnects every 50 ms, so a restarted server is found quickly. A short disconnectTimeout:
 * ioredis otherwise keeps a 2 s timer for a socket to a dead server when disconnecting.
 */
async function client(url: string): Promise<Redis> {
  const created = await connect(url, { retryStrategy: () => 50, disconnectTimeout: 10 });
  clients.push(created);
  return created;
}

async function settle<T>(promise: Promise<T>): Promise<{ ms: number; error?: { code?: string }; value?: T }> {
  const start = performance.now();
  try {
    const value = await promise;
    return { ms: performance.now() - start, value };
  } catch (error) {
    return { ms: performance.now() - start, error: error as { code?: string } };
  }
}

it('bounds every call by commandTimeout while Redis is blocked (DEBUG SLEEP)', async () => {
  const redis = await server();
  const admin = await client(redis.url);
  const store = redisStore({ client: await client(redis.url), prefix: 'slow:', commandTimeout: 100, breaker: false });
  await store.lock.acquire(['warm'], 't', 1000);
  const sleeping = admin.debug('SLEEP', '1');
  await sleep(20); // let the server start sleeping
  const results = await Promise.all([
    settle(store.getMany(['a', 'b'])),
    settle(store.setMany([{ key: 'a', entry: entry(1), ttl: 1000 }])),
    settle(store.lock.acquire(['a'], 't', 1000)),
    settle(store.lock.writeAndRelease([{ key: 'a', entry: entry(1), ttl: 1000 }], 't')),
    settle(store.lock.release(['a'], 't')),
    settle(store.delete(['a'])),
  ]);
  for (const result of results) {
    // The guard's timer ended the call (not the reply, which comes after the 1 s block): the
    // code says so; the lower bound says the timer did not fire early. No upper time bound: a
    // loaded machine may run the timer late, and the code already proves who ended the call.
    expect(result.error).toMatchObject({ code: 'E_STORE_TIMEOUT' });
    expect(result.ms).toBeGreaterThanOrEqual(50); // half the budget: the timer did not end the call at once (a descheduled test process reads its clock late)
  }
  await sleeping;
  // The late answers arrived and were dropped; the store works again at once.
  expect(await store.getMany(['warm'])).toEqual([undefined]);
});

it('never leaves a late rejection unhandled (timed out, then the connection dies)', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const redis = await server();
    const admin = await client(redis.url);
    const victim = await connect(redis.url, {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      disconnectTimeout: 10,
    });
    clients.push(victim);
    const store = redisStore({ client: victim, prefix: 'late:', commandTimeout: 50, breaker: false });
    void admin.debug('SLEEP', '2').catch(() => {});
    await sleep(20);
    const pending = [
      store.getMany(['a']),
      store.lock.acquire(['a'], 't', 1000),
      store.setMany([{ key: 'a', entry: entry(1), ttl: 1000 }]),
    ];
    for (const call of pending) await expect(call).rejects.toMatchObject({ code: 'E_STORE_TIMEOUT' });
    // The commands are still pending in ioredis; killing the server rejects them now, late.
    await redis.stop('SIGKILL');
    expect(await eventually(() => victim.status === 'end', 2000)).toBe(true);
    await sleep(50);
    expect(unhandled).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

it('fails fast while Redis is down, opens the breaker, and recovers by itself after a restart', async () => {
  const redis = await server();
  const redisClient = await client(redis.url);
  const store = redisStore({
    client: redisClient,
    prefix: 'down:',
    commandTimeout: 250,
    breaker: { threshold: 3, coolDown: 300 },
  });
  await store.setMany([{ key: 'k', entry: entry('before'), ttl: 60_000 }]);
  expect((await store.getMany(['k']))[0]?.value).toBe('before');

  await redis.stop('SIGKILL');
  // Whatever ioredis has noticed yet, a call right after the kill is bounded.
  const first = await settle(store.getMany(['k']));
  expect(first.error).toBeDefined();
  // Bounded by the 250 ms command timeout; the margin is for a loaded machine, the bound is for a hang.
  expect(first.ms).toBeLessThan(3000);
  expect(await eventually(() => redisClient.status !== 'ready', 2000)).toBe(true);

  // Not connected: rejected without sending (nothing queued offline), then the breaker opens.
  // (The call made right after the kill may still sit in ioredis's queues: it was sent before
  // ioredis noticed; it timed out for us all the same.)
  const queued = () =>
    redisClient.commandQueue.length +
    (redisClient as unknown as { offlineQueue: { length: number } }).offlineQueue.length;
  const queuedBefore = queued();
  const codes: (string | undefined)[] = [];
  // Fail-fast codes, not E_STORE_TIMEOUT: no call waited for a reply.
  for (let i = 0; i < 6; i++) codes.push((await settle(store.getMany(['k']))).error?.code);
  expect(codes.slice(-3)).toEqual(['E_CIRCUIT_OPEN', 'E_CIRCUIT_OPEN', 'E_CIRCUIT_OPEN']);
  expect(codes.filter((code) => code === 'E_STORE_UNAVAILABLE').length).toBeGreaterThanOrEqual(1);
  expect(store.breakerState).toBe('open');
  expect(queued()).toBe(queuedBefore);

  // Restart on the same port: ioredis reconnects, and after the cool-down one trial closes it.
  await server(redis.port);
  expect(await eventually(() => redisClient.status === 'ready', 5000)).toBe(true);
  expect(
    await eventually(
      async () => {
        const result = await settle(store.getMany(['k']));
        return result.error === undefined;
      },
      3000,
      50,
    ),
  ).toBe(true);
  expect(store.breakerState).toBe('closed');
  // The restarted server is empty (no persistence): a miss, then writes land again.
  expect(await store.getMany(['k'])).toEqual([undefined]);
  await store.setMany([{ key: 'k', entry: entry('after'), ttl: 60_000 }]);
  expect((await store.getMany(['k']))[0]?.value).toBe('after');
});

it('half-open: a failed trial keeps it open for another cool-down', async () => {
  const redis = await server();
  const redisClient = await client(redis.url);
  // 1 s: two calls in a row fall within it even on a loaded machine; the half-open state is awaited.
  const store = redisStore({ client: redisClient, prefix: 'trial:', breaker: { threshold: 1, coolDown: 1000 } });
  await redis.stop('SIGKILL');
  await eventually(() => redisClient.status !== 'ready', 2000);
  await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
  await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_CIRCUIT_OPEN' });
  expect(await eventually(() => store.breakerState === 'half-open', 5000)).toBe(true);
  await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' }); // the trial
  expect(store.breakerState).toBe('open');
  await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_CIRCUIT_OPEN' });
});

it('Redis down at start (connection refused): the first calls fail at once, not after readyTimeout; loads are computed', async () => {
  const port = await freePort();
  const absent = new Redis(`redis://127.0.0.1:${port}`, { retryStrategy: () => 1000, disconnectTimeout: 10 });
  absent.on('error', () => {});
  clients.push(absent);
  // A budget far past this test's own timeout: only the refused attempt can end the wait in time.
  const store = redisStore({
    client: absent,
    prefix: 'absent:',
    readyTimeout: 600_000,
    breaker: { threshold: 2, coolDown: 60_000 },
  });
  const first = await Promise.all([settle(store.getMany(['k'])), settle(store.lock.acquire(['k'], 't', 1000))]);
  for (const result of first) expect(result.error).toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
  // Failed as a down Redis fails: counted by the breaker, which now skips Redis.
  await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_CIRCUIT_OPEN' });
  const storeErrors: string[] = [];
  const cache = createCache({
    store,
    ttl: 60_000,
    hooks: { onStoreError: (error) => void storeErrors.push((error as { code?: string }).code ?? '?') },
  });
  expect(await cache.getOrCompute('load', () => 'computed')).toBe('computed');
  expect(storeErrors.length).toBeGreaterThan(0);
  await cache.close();
  expect((absent as unknown as { offlineQueue: { length: number } }).offlineQueue.length).toBe(0);
});

it('a client still connecting for the first time (no attempt failed) is waited for, up to readyTimeout, then calls fail fast', async () => {
  // Accepts the connection and never answers: ioredis's ready check is in flight, nothing failed.
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as { port: number }).port;
  const connecting = new Redis(`redis://127.0.0.1:${port}`, { disconnectTimeout: 10 });
  connecting.on('error', () => {});
  clients.push(connecting);
  try {
    const store = redisStore({ client: connecting, prefix: 'connecting:', readyTimeout: 100, breaker: false });
    // The first calls wait (together) for the first "ready", which never comes: E_STORE_UNAVAILABLE
    // once the 100 ms budget is spent, never E_STORE_TIMEOUT (nothing was sent).
    const first = await Promise.all([settle(store.getMany(['k'])), settle(store.lock.acquire(['k'], 't', 1000))]);
    for (const result of first) {
      expect(result.error).toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
      expect(result.ms).toBeGreaterThanOrEqual(50); // half the budget: the timer did not end the call at once (a descheduled test process reads its clock late)
    }
    // The budget is spent once, not per call: from now on every call fails fast.
    for (let i = 0; i < 50; i++)
      await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
    await expect(store.lock.acquire(['k'], 't', 1000)).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
    expect(connecting.status).toBe('connect');
    expect((connecting as unknown as { offlineQueue: { length: number } }).offlineQueue.length).toBe(0);
  } finally {
    connecting.disconnect();
    silent.close();
  }
});

it('a client that gives up before its first ready (retryStrategy stops): the waiting calls end with it, not at readyTimeout', async () => {
  const port = await freePort();
  const giving = new Redis(`redis://127.0.0.1:${port}`, { retryStrategy: () => null, enableOfflineQueue: false });
  giving.on('error', () => {});
  clients.push(giving);
  // A deadline far past this test's own timeout: only the client's 'end' can end the wait in time.
  const store = redisStore({ client: giving, prefix: 'giving:', readyTimeout: 600_000, breaker: false });
  const result = await settle(store.getMany(['k']));
  expect(result.error).toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
  expect(giving.status).toBe('end');
});

it('readyTimeout 0: a client not ready yet fails fast (and a lazyConnect client is started)', async () => {
  const redis = await server();
  const lazy = new Redis(redis.url, { lazyConnect: true, disconnectTimeout: 10 });
  clients.push(lazy);
  const store = redisStore({ client: lazy, prefix: 'lazy0:', readyTimeout: 0 });
  expect(lazy.status).toBe('wait');
  await expect(store.getMany(['k'])).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
  expect(await eventually(() => lazy.status === 'ready', 2000)).toBe(true);
  await expect(store.getMany(['k'])).resolves.toEqual([undefined]);
});

it('starts a lazyConnect client, as ioredis would, and its first call waits for the connection', async () => {
  const redis = await server();
  const lazy = new Redis(redis.url, { lazyConnect: true, disconnectTimeout: 10 });
  clients.push(lazy);
  const store = redisStore({ client: lazy, prefix: 'lazy:' });
  expect(lazy.status).toBe('wait');
  await expect(store.getMany(['k'])).resolves.toEqual([undefined]);
  expect(store.breakerState).toBe('closed');
});

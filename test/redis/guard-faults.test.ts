/**
 * The fleet guarantee (one fill per key) under the conditions it exists for: a deploy's first
 * burst while the clients still connect, an event loop blocked past the command timeout, a
 * Redis stall that opens the breaker. Replicas are registries with their own connections to a
 * real redis-server; fills are counted, not timed.
 */
import Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore, type RedisStoreOptions } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { connect, eventually, randomPrefix, redisUrl, sleep } from './helpers';

const clients: Redis[] = [];
const servers: RedisServer[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
});

/** A client created as users do (`new Redis(url)`), not awaited: still connecting. */
function freshClient(url: string): Redis {
  const client = new Redis(url, { disconnectTimeout: 10 });
  client.on('error', () => {});
  clients.push(client);
  return client;
}

async function connected(url: string): Promise<Redis> {
  const client = await connect(url, { disconnectTimeout: 10 });
  clients.push(client);
  return client;
}

function replica(
  client: Redis,
  prefix: string,
  options: Partial<RedisStoreOptions> = {},
  cacheOptions: { lockWaitTimeout?: number } = {},
) {
  const storeErrors: string[] = [];
  const store = redisStore({ client, prefix, ...options });
  const cache = createCache({
    ttl: Infinity,
    store,
    ...cacheOptions,
    hooks: {
      onStoreError: (error, operation) => void storeErrors.push(`${operation}: ${(error as { code?: string }).code}`),
    },
  });
  return { store, cache, storeErrors };
}

it('startup burst: calls made before the first "ready" wait for it: 1 fill across the fleet, value stored', async () => {
  const prefix = randomPrefix('startup');
  // A command timeout with room for a starved machine (npm test beside two busy loops): what is
  // checked is that a call made before "ready" waits for it rather than failing at once.
  const replicas = [0, 1, 2].map(() => replica(freshClient(redisUrl()), prefix, { commandTimeout: 2_000 }));
  for (const { store } of replicas) expect(store.client.status).not.toBe('ready');
  let fills = 0;
  const fill = async () => {
    fills++;
    await sleep(20);
    return 'v';
  };
  const loads = replicas.flatMap(({ cache }) => Array.from({ length: 50 }, () => cache.getOrCompute('k', fill)));
  expect(await Promise.all(loads)).toEqual(loads.map(() => 'v'));
  expect(fills).toBe(1);
  for (const { storeErrors, store } of replicas) {
    expect(storeErrors).toEqual([]);
    expect(store.breakerState).toBe('closed');
  }
  const admin = await connected(redisUrl());
  expect(await admin.exists(`${prefix}{k}`)).toBe(1);
});

it('busy event loop: a reply already received is not a timeout: no E_STORE_TIMEOUT, 1 fill across two replicas', async () => {
  const prefix = randomPrefix('busy');
  const a = replica(await connected(redisUrl()), prefix, { commandTimeout: 100 });
  // B only waits for A's lock: a patient timeout, so a starved machine (two CPU hogs) does not time
  // out B's own calls and make it fill without the lock (degradation, not what this checks).
  const b = replica(await connected(redisUrl()), prefix, { commandTimeout: 2000 });
  // Replica A's event loop is blocked (CPU-bound work) for 3 × the command timeout right after it
  // sent its lock call (the read that takes the lock of a missing key): Redis answered within a
  // millisecond, but the timer is due as well.
  const readOrAcquire = a.store.lock.readOrAcquire.bind(a.store.lock);
  let blocked = false;
  a.store.lock.readOrAcquire = (keys, lockable, token, ttl) => {
    const pending = readOrAcquire(keys, lockable, token, ttl);
    if (!blocked) {
      blocked = true;
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // busy
      }
    }
    return pending;
  };
  let fills = 0;
  let filling!: () => void;
  const started = new Promise<void>((resolve) => (filling = resolve));
  const fill = async () => {
    fills++;
    filling();
    await sleep(100);
    return 'v';
  };
  const first = a.cache.getOrCompute('k', fill);
  await started;
  // B misses while A fills: A's lock must be standing, so B waits for A's value.
  const second = b.cache.getOrCompute('k', fill);
  expect(await Promise.all([first, second])).toEqual(['v', 'v']);
  expect(blocked).toBe(true);
  // The blocked call (the read that took the lock: 'getMany') is not a timeout. (A later call may
  // still outlast 100 ms on a starved machine: not what this checks.)
  expect(a.storeErrors.filter((failure) => failure.startsWith('getMany'))).toEqual([]);
  expect(fills).toBe(1);
});

it('Redis stall (DEBUG SLEEP) with the breaker opening: no lock of ours is left, the next replica does not wait', async () => {
  const server = await startRedisServer({ extraArgs: ['--enable-debug-command', 'yes'] });
  servers.push(server);
  const prefix = randomPrefix('stall');
  const admin = await connected(server.url);
  const a = replica(await connected(server.url), prefix, {
    commandTimeout: 100,
    breaker: { threshold: 2, coolDown: 5000 },
  });
  const sleeping = admin.debug('SLEEP', '0.6');
  await sleep(20); // the server is asleep now
  const keys = ['k1', 'k2', 'k3'];
  // The read times out (one failure), then the lock acquire (the second: the breaker opens);
  // the acquire's script runs when Redis wakes and takes the locks.
  const values = await Promise.all(keys.map((key) => a.cache.getOrCompute(key, () => `a:${key}`)));
  expect(values).toEqual(keys.map((key) => `a:${key}`));
  expect(a.storeErrors.some((error) => error.endsWith('E_STORE_TIMEOUT'))).toBe(true);
  expect(a.store.breakerState).toBe('open');
  await sleeping;
  // No lock of ours survives the stall (the releases go out although the breaker is open).
  const locksLeft = async () => (await admin.keys(`${prefix}*:lock`)).length;
  expect(await eventually(async () => (await locksLeft()) === 0, 1000)).toBe(true);
  // Another replica's miss finds no lock to wait on: it fills at once, no contention, no timeout.
  const b = replica(await connected(server.url), prefix, {}, { lockWaitTimeout: 3000 });
  expect(await b.cache.getOrCompute('k1', () => 'b:k1')).toBe('b:k1');
  const counters = b.cache.metrics().total;
  expect(counters.lockContended).toBe(0);
  expect(counters.lockTimeouts).toBe(0);
  expect(counters.fills).toBe(1);
});

it('a lock acquire that timed out but ran later has its locks released by the store when the reply comes', async () => {
  const server = await startRedisServer({ extraArgs: ['--enable-debug-command', 'yes'] });
  servers.push(server);
  const prefix = randomPrefix('late-acquire');
  const admin = await connected(server.url);
  const { store } = replica(await connected(server.url), prefix, { commandTimeout: 50, breaker: false });
  const sleeping = admin.debug('SLEEP', '0.3');
  await sleep(20);
  // Nobody calls release here (the registry would): the store alone must not leave these locks.
  await expect(store.lock.acquire(['x', 'y'], 'token-1', 60_000)).rejects.toMatchObject({ code: 'E_STORE_TIMEOUT' });
  await sleeping;
  expect(await eventually(async () => (await admin.keys(`${prefix}*:lock`)).length === 0, 1000)).toBe(true);
});

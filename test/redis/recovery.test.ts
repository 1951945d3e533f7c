/**
 * The fill lock is back as soon as Redis answers again, not after a fixed cool-down: after a stall
 * (SIGSTOP / SIGCONT of redis-server) the late replies of the calls that timed out end the
 * breaker's cool-down and the next call, the trial, closes it; after a restart the client's
 * reconnection (its ready check) closes it. Each test gives the breaker a cool-down of a minute, so
 * only those signals can bring the lock back within the test; what is counted is fills per key.
 */
import Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { connect, eventually, randomPrefix, sleep } from './helpers';

const servers: RedisServer[] = [];
const clients: Redis[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  for (const server of servers.splice(0)) {
    try {
      process.kill(server.pid, 'SIGCONT');
    } catch {
      // already gone
    }
    await server.stop('SIGKILL');
  }
});

async function server(port?: number): Promise<RedisServer> {
  const started = await startRedisServer({ port });
  servers.push(started);
  return started;
}

/** Reconnects every 20 ms; a short disconnectTimeout so a dead server does not hold the test. */
async function client(url: string): Promise<Redis> {
  const created = await connect(url, { retryStrategy: () => 20, disconnectTimeout: 10 });
  created.on('error', () => {});
  clients.push(created);
  return created;
}

const KEYS = Array.from({ length: 20 }, (_, i) => `k${i}`);

interface Replica {
  readonly cache: Cache;
  readonly store: RedisStore;
}

/** Two replicas (a client each) of one fleet; breaker: threshold 2, a cool-down of a minute. */
async function fleet(url: string, prefix: string): Promise<Replica[]> {
  const out: Replica[] = [];
  for (let i = 0; i < 2; i++) {
    const store = redisStore({
      client: await client(url),
      prefix,
      commandTimeout: 100,
      breaker: { threshold: 2, coolDown: 60_000 },
    });
    out.push({ store, cache: createCache({ store, ttl: 60_000, lock: true, lockPollInterval: 10 }) });
  }
  return out;
}

/** Fills per key when every replica loads every key `rounds` times at once (fill: 20 ms). */
async function stampede(replicas: readonly Replica[], rounds: number): Promise<Map<string, number>> {
  const fills = new Map<string, number>();
  const loads: Promise<unknown>[] = [];
  for (const { cache } of replicas) {
    for (let r = 0; r < rounds; r++) {
      for (const key of KEYS) {
        loads.push(
          cache.getOrCompute(key, async () => {
            fills.set(key, (fills.get(key) ?? 0) + 1);
            await sleep(20);
            return key;
          }),
        );
      }
    }
  }
  const values = await Promise.all(loads);
  expect(values).toEqual(loads.map((_, i) => KEYS[i % KEYS.length]));
  return fills;
}

/** Fails calls until every replica's breaker is open. */
async function openBreakers(replicas: readonly Replica[]): Promise<void> {
  for (const { store } of replicas) {
    expect(
      await eventually(
        async () => {
          await store.getMany(['probe']).catch(() => undefined);
          return store.breakerState === 'open';
        },
        10_000,
        0,
      ),
    ).toBe(true);
  }
}

it('after a stall: the late replies end the cool-down, the trial closes it, and the next stampede fills each key once', async () => {
  const redis = await server();
  const replicas = await fleet(redis.url, randomPrefix('recovery-stall'));
  process.kill(redis.pid, 'SIGSTOP');
  await openBreakers(replicas);
  // During the stall loads are answered without Redis (each replica fills): nothing waits on it.
  const during = await stampede(replicas, 1);
  expect([...during.values()].every((n) => n >= 1)).toBe(true);
  process.kill(redis.pid, 'SIGCONT');
  // The calls that timed out are answered now: each breaker leaves its minute-long cool-down.
  for (const { store } of replicas) expect(await eventually(() => store.breakerState !== 'open', 10_000)).toBe(true);
  for (const { cache } of replicas) await cache.invalidate(KEYS);
  const after = await stampede(replicas, 5);
  expect(Object.fromEntries(after)).toEqual(Object.fromEntries(KEYS.map((key) => [key, 1])));
  for (const { store } of replicas) expect(store.breakerState).toBe('closed');
});

it('after a kill and an empty restart: the reconnected client closes the breaker, and the next stampede fills each key once', async () => {
  let redis = await server();
  const replicas = await fleet(redis.url, randomPrefix('recovery-restart'));
  await stampede(replicas, 1);
  const port = redis.port;
  await redis.stop('SIGKILL');
  servers.splice(servers.indexOf(redis), 1);
  await openBreakers(replicas);
  redis = await server(port);
  for (const { store } of replicas)
    expect(await eventually(() => (store.client as Redis).status === 'ready', 10_000)).toBe(true);
  // Empty after the restart: every key is a miss, and each is filled by one replica.
  const after = await stampede(replicas, 5);
  expect(Object.fromEntries(after)).toEqual(Object.fromEntries(KEYS.map((key) => [key, 1])));
  for (const { store } of replicas) expect(store.breakerState).toBe('closed');
});

it('a Redis that stays down costs no waiting: calls fail fast, a trial now and then', async () => {
  const redis = await server();
  const store = redisStore({
    client: await client(redis.url),
    prefix: randomPrefix('recovery-down'),
    commandTimeout: 100,
    breaker: { threshold: 1, coolDown: 50, maxCoolDown: 400 },
  });
  await redis.stop('SIGKILL');
  servers.splice(servers.indexOf(redis), 1);
  expect(await eventually(() => (store.client as Redis).status !== 'ready', 5000)).toBe(true);
  const codes: Record<string, number> = {};
  // 400 calls over at least 400 ms (a loaded machine only stretches it): never a timeout, mostly refused.
  for (let i = 0; i < 400; i++) {
    const code = await store.getMany(['k']).then(
      () => 'ok',
      (error: { code?: string }) => error.code ?? 'uncoded',
    );
    codes[code] = (codes[code] ?? 0) + 1;
    await sleep(1);
  }
  expect(codes.ok).toBeUndefined();
  expect(codes.E_STORE_TIMEOUT).toBeUndefined();
  // Trials at 50, 100, 200, 400, 400… ms: a handful of calls sent, the rest refused at once.
  expect(codes.E_STORE_UNAVAILABLE).toBeLessThan(20);
  expect(codes.E_CIRCUIT_OPEN).toBeGreaterThan(380);
});

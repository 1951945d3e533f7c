/**
 * The fleet: several Node processes (replicas), each with its own registry and its own Redis
 * connection, sharing one Redis. The stampede is fired in every replica at once; the fills are
 * counted in Redis by the fills themselves. One fill per key across the whole fleet.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from './helpers';

const FIXTURE = join(__dirname, 'fixtures', 'replica.ts');
const REPLICAS = 4;

interface Done {
  type: 'done';
  wrong: number;
  ms: number;
  metrics: Record<string, number>;
}

let admin: Redis;
const children: ChildProcess[] = [];

beforeAll(async () => {
  admin = await connect();
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await admin.quit();
});

/** Forks a replica and resolves once it is connected and waiting for "go". */
function replica(env: Record<string, string>): Promise<{ child: ChildProcess; next(type: string): Promise<unknown> }> {
  const child = fork(FIXTURE, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, REDIS_URL: process.env.REDIS_URL!, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  const inbox: { type: string }[] = [];
  const waiting: { type: string; resolve(message: unknown): void; reject(error: Error): void }[] = [];
  const deliver = () => {
    for (let w = waiting.length - 1; w >= 0; w--) {
      const index = inbox.findIndex((message) => message.type === waiting[w]!.type || message.type === 'error');
      if (index === -1) continue;
      const [message] = inbox.splice(index, 1);
      const [waiter] = waiting.splice(w, 1);
      if (message!.type === 'error')
        waiter!.reject(new Error(`replica failed: ${(message as { message?: string }).message}`));
      else waiter!.resolve(message);
    }
  };
  child.on('message', (message: { type: string }) => {
    inbox.push(message);
    deliver();
  });
  child.on('exit', (code, signal) => {
    if (signal === 'SIGKILL') return;
    for (const waiter of waiting.splice(0))
      waiter.reject(new Error(`replica exited (${code ?? signal}) before "${waiter.type}"`));
  });
  const next = (type: string) =>
    new Promise<unknown>((resolve, reject) => {
      waiting.push({ type, resolve, reject });
      deliver();
    });
  return next('ready').then(() => ({ child, next }));
}

async function stampede(env: Record<string, string>): Promise<Done[]> {
  const replicas = await Promise.all(
    Array.from({ length: REPLICAS }, (_, i) => replica({ ...env, FLEET_INDEX: String(i) })),
  );
  const done = replicas.map((r) => r.next('done') as Promise<Done>);
  for (const r of replicas) r.child.send({ type: 'go' });
  return Promise.all(done);
}

it(`${REPLICAS} processes x 500 concurrent loads of one cold key: exactly one fill fleet-wide`, async () => {
  const prefix = randomPrefix('fleet-one');
  const results = await stampede({
    FLEET_MODE: 'single',
    FLEET_PREFIX: prefix,
    FLEET_LOADS: '500',
    FLEET_FILL_MS: '100',
  });
  expect(await admin.get(`${prefix}fills`)).toBe('1');
  for (const result of results) {
    expect(result.wrong).toBe(0);
    expect(result.metrics.fills).toBeLessThanOrEqual(1);
    expect(result.metrics.storeErrors).toBe(0);
    expect(result.metrics.lockTimeouts).toBe(0);
  }
  expect(results.reduce((sum, r) => sum + r.metrics.fills!, 0)).toBe(1);
  // In each process, 500 loads became one flight (499 coalesced at least), or, for a replica that
  // started them after the fill landed (a starved process: CI beside two CPU hogs), were answered
  // by the stored value: never a fill of their own.
  for (const result of results) expect(result.metrics.coalesced! + result.metrics.hits!).toBeGreaterThanOrEqual(499);
  // The replicas really raced: at least one found the lock held by another and waited for its value.
  expect(results.reduce((sum, r) => sum + r.metrics.lockContended!, 0)).toBeGreaterThanOrEqual(1);
}, 60_000);

it(`${REPLICAS} processes x 500 concurrent loads over 100 keys through a batch loader: each key filled once fleet-wide`, async () => {
  const prefix = randomPrefix('fleet-batch');
  const results = await stampede({
    FLEET_MODE: 'batch',
    FLEET_PREFIX: prefix,
    FLEET_LOADS: '500',
    FLEET_KEYS: '100',
    FLEET_FILL_MS: '100',
  });
  const fills = await admin.hgetall(`${prefix}fills`);
  expect(Object.keys(fills)).toHaveLength(100);
  expect(Object.values(fills).every((count) => count === '1')).toBe(true);
  for (const result of results) {
    expect(result.wrong).toBe(0);
    expect(result.metrics.storeErrors).toBe(0);
    expect(result.metrics.lockTimeouts).toBe(0);
  }
  expect(results.reduce((sum, r) => sum + r.metrics.fills!, 0)).toBe(100);
  expect(results.reduce((sum, r) => sum + r.metrics.lockContended!, 0)).toBeGreaterThanOrEqual(1);
}, 60_000);

describe('a lock holder killed with SIGKILL mid-fill', () => {
  async function killHolder(prefix: string, lockTtl: number): Promise<void> {
    const holder = await replica({
      FLEET_MODE: 'hold',
      FLEET_PREFIX: prefix,
      FLEET_LOCK_TTL: String(lockTtl),
      FLEET_LOADS: '1',
    });
    const filling = holder.next('filling');
    holder.child.send({ type: 'go' });
    await filling;
    holder.child.kill('SIGKILL');
    await new Promise((resolve) => holder.child.once('exit', resolve));
    expect(await admin.pttl(`${prefix}cache:{cold}:lock`)).toBeGreaterThan(0);
  }

  it('another replica fills once lockTtl expires', async () => {
    const prefix = randomPrefix('fleet-kill-ttl');
    // The survivor is connected before the kill, and the lock lives 2 s: on a loaded machine the
    // survivor's first try still finds it held (the point of the test), and the wait stays short.
    const client = await connect();
    try {
      await killHolder(prefix, 2_000);
      const cache = createCache({
        ttl: Infinity,
        store: redisStore({ client, prefix: `${prefix}cache:` }),
        lockTtl: 2_000,
        lockWaitTimeout: 30_000,
      });
      const value = await cache.getOrCompute('cold', () => 'filled-by-survivor', { ttl: 60_000 });
      expect(value).toBe('filled-by-survivor');
      const metrics = cache.metrics().total;
      // It waited on the dead holder's lock, then won it after the expiry: not a wait timeout.
      expect(metrics).toMatchObject({ lockContended: 1, lockAcquired: 1, lockTimeouts: 0, fills: 1 });
      // The value was written under the survivor's lock: the next replica hits.
      const other = createCache({ ttl: Infinity, store: redisStore({ client, prefix: `${prefix}cache:` }) });
      expect(await other.getOrCompute('cold', () => 'not called')).toBe('filled-by-survivor');
      expect(other.metrics().total.hits).toBe(1);
    } finally {
      await client.quit();
    }
  });

  it('another replica fills locally once lockWaitTimeout is reached (the lock outlives the wait)', async () => {
    const prefix = randomPrefix('fleet-kill-wait');
    await killHolder(prefix, 60_000);
    const client = await connect();
    try {
      const cache = createCache({
        ttl: Infinity,
        store: redisStore({ client, prefix: `${prefix}cache:` }),
        lockTtl: 60_000,
        lockWaitTimeout: 400,
      });
      const start = Date.now();
      expect(await cache.getOrCompute('cold', () => 'local', { ttl: 60_000 })).toBe('local');
      const waited = Date.now() - start;
      expect(cache.metrics().total).toMatchObject({ lockContended: 1, lockTimeouts: 1, fills: 1, lockAcquired: 0 });
      expect(waited).toBeGreaterThanOrEqual(390);
      // Bounded by lockWaitTimeout, not by the lock's 60 s (the margin is for a loaded machine).
      expect(waited).toBeLessThan(10_000);
    } finally {
      await client.quit();
    }
  });
});

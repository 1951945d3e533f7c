/**
 * A client waiting out a long reconnect delay (ioredis's default backs off to 2 s) is reconnected
 * as soon as Redis accepts connections again (src/redis/early-reconnect.ts). The clients here wait
 * a minute between attempts (`retryStrategy: () => 60_000`), so only the store's probe can make
 * them ready within a test: no timing is asserted, only that it happened. Then the protocol parts
 * on a fake client: probes counted, one connect() per accepted probe, shared by the stores of one
 * client, stopped with the last of them.
 */
import { EventEmitter } from 'node:events';
import Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { reconnectEarly, type ProbeTarget } from '../../src/redis/early-reconnect';
import { redisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { eventually, randomPrefix, sleep } from './helpers';

const servers: RedisServer[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  for (const server of servers.splice(0)) await server.stop('SIGKILL');
});

async function server(port?: number): Promise<RedisServer> {
  const started = await startRedisServer({ port });
  servers.push(started);
  return started;
}

/** A client whose own next attempt after a drop is a minute away. */
async function slowClient(port: number): Promise<Redis> {
  const client = new Redis({ host: '127.0.0.1', port, retryStrategy: () => 60_000, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  clients.push(client);
  await eventually(() => client.status === 'ready', 5_000);
  return client;
}

it('Redis killed and restarted: a client a minute from its next attempt is ready again, and the lock works', async () => {
  const first = await server();
  const client = await slowClient(first.port);
  const store = redisStore({ client, prefix: randomPrefix('early') });
  const cache = createCache({ store, ttl: 60_000, lock: true });
  try {
    await first.stop('SIGKILL');
    servers.length = 0;
    expect(await eventually(() => client.status === 'reconnecting', 5_000)).toBe(true);
    await server(first.port);
    expect(await eventually(() => client.status === 'ready', 10_000)).toBe(true);
    // The store answers through it again: a value written and read back from Redis.
    let fills = 0;
    const fill = async () => (fills++, 'v');
    expect(await cache.getOrCompute('k', fill)).toBe('v');
    expect(await cache.getOrCompute('k', fill)).toBe('v');
    expect(fills).toBe(1);
  } finally {
    await cache.close();
  }
});

it('after the store is closed, it no longer reconnects the client', async () => {
  const first = await server();
  const client = await slowClient(first.port);
  const store = redisStore({ client, prefix: randomPrefix('early-closed') });
  await store.close();
  await first.stop('SIGKILL');
  servers.length = 0;
  expect(await eventually(() => client.status === 'reconnecting', 5_000)).toBe(true);
  await server(first.port);
  await sleep(500); // five probe intervals: a probe still running would have reconnected it
  expect(client.status).toBe('reconnecting');
});

/** A fake ioredis client: status and events as ioredis sets and emits them. */
class FakeClient extends EventEmitter {
  status = 'ready';
  connects = 0;
  readonly options = { host: '127.0.0.1', port: 1 };
  connect(): Promise<void> {
    this.connects++;
    this.status = 'connecting';
    return Promise.resolve();
  }
  drop(delay: number): void {
    this.status = 'reconnecting';
    this.emit('reconnecting', delay);
  }
}

describe('reconnectEarly (fake client)', () => {
  it('probes only past `after`, connects once when a probe is accepted, and stops', async () => {
    const client = new FakeClient();
    let accepts = false;
    const probes: ProbeTarget[] = [];
    const probe = async (target: ProbeTarget) => (probes.push(target), accepts);
    const release = reconnectEarly(client, { after: 200, interval: 2, probe });
    try {
      client.drop(100); // ioredis reconnects soon enough by itself
      await sleep(30);
      expect(probes).toHaveLength(0);
      client.drop(2_000);
      expect(await eventually(() => probes.length >= 3, 2_000, 2)).toBe(true);
      expect(client.connects).toBe(0); // refused probes: no attempt
      expect(probes[0]).toEqual({ host: '127.0.0.1', port: 1 });
      accepts = true;
      expect(await eventually(() => client.connects === 1, 2_000, 2)).toBe(true);
      const after = probes.length;
      await sleep(30);
      expect(probes.length).toBe(after); // stopped once it connected
      expect(client.connects).toBe(1);
    } finally {
      release();
    }
  });

  it('one probe per client for all its stores, stopped with the last one', async () => {
    const client = new FakeClient();
    let probes = 0;
    const probe = async () => (probes++, false);
    const releases = [1, 2, 3].map(() => reconnectEarly(client, { interval: 2, probe }));
    client.drop(2_000);
    await sleep(40);
    const shared = probes;
    expect(shared).toBeGreaterThan(0);
    expect(client.listenerCount('reconnecting')).toBe(1);
    releases[0]!();
    releases[0]!(); // twice: counted once
    releases[1]!();
    await sleep(20);
    expect(probes).toBeGreaterThan(shared); // one store is left: still probing
    releases[2]!();
    const stopped = probes;
    await sleep(30);
    expect(probes).toBeLessThanOrEqual(stopped + 1); // one probe may have been under way
    expect(client.listenerCount('reconnecting')).toBe(0);
  });

  it('no probe for a Sentinel or Cluster client (ioredis finds their address)', () => {
    const sentinel = Object.assign(new FakeClient(), { options: { sentinels: [{ host: 'a', port: 1 }] } });
    const cluster = Object.assign(new FakeClient(), { isCluster: true });
    reconnectEarly(sentinel)();
    reconnectEarly(cluster)();
    expect(sentinel.listenerCount('reconnecting')).toBe(0);
    expect(cluster.listenerCount('reconnecting')).toBe(0);
  });
});

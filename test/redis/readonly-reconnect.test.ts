/**
 * A failover that moves a name rather than disconnecting clients (ElastiCache's DNS, an operator's
 * REPLICAOF): the clients stay connected to the demoted master, which answers reads and refuses
 * every write, the lock scripts included, with READONLY. A TCP proxy plays the DNS name
 * (test/setup/switching-proxy.ts): after the switch, new connections reach the promoted server,
 * the ones already open still reach the old one. The store reconnects a client answered READONLY
 * (src/redis/reconnect.ts), so the next stampede takes the lock on the new master: one fill per key
 * across two replicas (without it, each replica fills each key, for as long as its connection stays
 * up: 2 fills per key, checked with the store's line that installs it removed).
 */
import Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { isReadOnly, reconnectOnReadOnly, type Reconnectable } from '../../src/redis/reconnect';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { switchingProxy, type SwitchingProxy } from '../setup/switching-proxy';
import { connect, eventually, randomPrefix, sleep } from './helpers';

const servers: RedisServer[] = [];
const clients: Redis[] = [];
let proxy: SwitchingProxy | undefined;

afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await proxy?.close();
  proxy = undefined;
  for (const server of servers.splice(0)) await server.stop('SIGKILL');
});

interface Replica {
  readonly cache: Cache;
  readonly store: RedisStore;
  readonly client: Redis;
}

async function replicas(url: string, prefix: string): Promise<Replica[]> {
  const out: Replica[] = [];
  for (let i = 0; i < 2; i++) {
    const client = await connect(url, { retryStrategy: () => 20, disconnectTimeout: 10 });
    client.on('error', () => {});
    clients.push(client);
    const store = redisStore({ client, prefix, subscriber: false });
    out.push({ client, store, cache: createCache({ store, ttl: 60_000, lock: true, lockPollInterval: 10 }) });
  }
  return out;
}

/** Fills per key when both replicas load every key at once (fill: 20 ms). */
async function stampede(fleet: readonly Replica[], keys: readonly string[]): Promise<number[]> {
  const fills = keys.map(() => 0);
  const loads = fleet.flatMap(({ cache }) =>
    keys.map((key, i) =>
      cache.getOrCompute(key, async () => {
        fills[i]!++;
        await sleep(20);
        return key;
      }),
    ),
  );
  expect(await Promise.all(loads)).toEqual(fleet.flatMap(() => keys));
  return fills;
}

const keysOf = (round: string): string[] => Array.from({ length: 10 }, (_, i) => `${round}${i}`);

it('a client left on a demoted master is reconnected at its first READONLY: the next stampede fills each key once, on the new master', async () => {
  const old = await startRedisServer();
  // Its replica (the old master, once demoted) syncs at once, not after the diskless-sync delay (5 s).
  const promoted = await startRedisServer({ extraArgs: ['--repl-diskless-sync-delay', '0'] });
  servers.push(old, promoted);
  proxy = await switchingProxy(old.port);
  const prefix = randomPrefix('readonly');
  const fleet = await replicas(`redis://127.0.0.1:${proxy.port}`, prefix);
  expect(await stampede(fleet, keysOf('before'))).toEqual(keysOf('before').map(() => 1));

  // The failover: the old master becomes the promoted one's replica, the name moves.
  const admin = await connect(old.url);
  clients.push(admin);
  await admin.call('REPLICAOF', '127.0.0.1', String(promoted.port));
  expect(
    await eventually(async () => (await admin.info('replication')).includes('master_link_status:up'), 10_000),
  ).toBe(true);
  proxy.target = promoted.port;
  const streams = fleet.map(({ client }) => (client as unknown as { stream: unknown }).stream);

  // The first stampede meets READONLY at the lock (each replica fills: nothing fails).
  await stampede(fleet, keysOf('switch'));
  const reconnected = await eventually(
    () =>
      fleet.every(
        ({ client }, i) =>
          client.status === 'ready' && (client as unknown as { stream: unknown }).stream !== streams[i],
      ),
    5000,
  );
  const after = await stampede(fleet, keysOf('after'));
  expect({ reconnected, after }).toEqual({ reconnected: true, after: keysOf('after').map(() => 1) });
  // Written to the new master, where the name points now.
  const onPromoted = await connect(promoted.url);
  clients.push(onPromoted);
  expect(await onPromoted.exists(...keysOf('after').map((key) => `${prefix}{${key}}`))).toBe(10);
  for (const { store } of fleet) expect(store.breakerState).toBe('closed');
});

describe('reconnectOnReadOnly', () => {
  interface Fake extends Reconnectable {
    status: string;
    stream: object;
    reconnects: number;
  }
  function fake(): Fake {
    const client: Fake = {
      status: 'ready',
      stream: {},
      reconnects: 0,
      disconnect(reconnect?: boolean) {
        if (reconnect === true) client.reconnects++;
      },
    };
    return client;
  }
  const readOnly = new Error("READONLY You can't write against a read only replica.");

  it('once per connection and per interval, for READONLY replies only, never on a Cluster', () => {
    let now = 0;
    const client = fake();
    const seen = reconnectOnReadOnly(client, 1000, () => now)!;
    seen(new Error('ERR something else'));
    seen('READONLY as a string is not a reply');
    expect(client.reconnects).toBe(0);
    seen(readOnly);
    seen(readOnly); // the same connection's other replies
    expect(client.reconnects).toBe(1);
    client.stream = {}; // reconnected, to a replica again
    now = 500;
    seen(readOnly);
    expect(client.reconnects).toBe(1);
    now = 1000;
    seen(readOnly);
    expect(client.reconnects).toBe(2);
    client.status = 'reconnecting';
    client.stream = {};
    now = 5000;
    seen(readOnly);
    expect(client.reconnects).toBe(2);
    expect(reconnectOnReadOnly({ ...fake(), isCluster: true })).toBeUndefined();
    expect(isReadOnly(readOnly)).toBe(true);
  });
});

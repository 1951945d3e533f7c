/**
 * The subscriber by default: `redisStore({ client })`, as a newcomer writes it, wakes its lock
 * waiters the moment the value lands. The store opens its own connection (`client.duplicate()`)
 * the first time this process waits on another's lock, owns it and closes it on `cache.close()`
 * (or when the user's client ends); `subscriber: false` opts out. The waiters here run on a clock
 * whose poll sleeps never end: without the announcement they are never answered.
 */
import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { deferred } from '../helpers';
import { connect, eventually, randomPrefix, stuckClock, within } from './helpers';
import { freePort } from '../setup/redis-server';

const connections: Redis[] = [];
let admin: Redis;

beforeAll(async () => {
  admin = await connect();
});

afterAll(async () => {
  for (const client of connections) if (client.status !== 'end') client.disconnect();
  admin.disconnect();
});

/** A client with a name of its own: its duplicate() carries the same name, so CLIENT LIST counts both. */
async function namedClient(enableOfflineQueue = true): Promise<{ client: Redis; name: string }> {
  const name = `hc-sub-${randomBytes(4).toString('hex')}`;
  const client = await connect(undefined, { connectionName: name, enableOfflineQueue });
  connections.push(client);
  return { client, name };
}

async function connectionsNamed(name: string): Promise<number> {
  const list = (await admin.client('LIST')) as string;
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

// enableOfflineQueue: false (the README's client) is copied by duplicate(): the SUBSCRIBE sent
// while the new connection is still connecting fails, and is sent again once it is ready.
it.each([true, false])(
  'redisStore({ client }) (enableOfflineQueue %s): the waiter is woken by the announcement through a subscriber the store opened, and closed on cache.close()',
  async (enableOfflineQueue) => {
    const prefix = randomPrefix('sub-default');
    const holderClient = await connect();
    connections.push(holderClient);
    const holder = createCache({ store: redisStore({ client: holderClient, prefix }), ttl: 60_000 });
    const { client, name } = await namedClient(enableOfflineQueue);
    const store = redisStore({ client, prefix });
    const clock = stuckClock();
    const waiter = createCache({ store, ttl: 60_000, clock, lockPollInterval: 10_000, lockWaitTimeout: 60_000 });
    // Opened lazily: a store nobody waits through costs no connection.
    expect(store.waitStats()).toMatchObject({ enabled: true, owned: true, listening: false });
    await store.getMany(['k']);
    expect(await connectionsNamed(name)).toBe(1);

    const gate = deferred<string>();
    const filling = deferred<void>();
    const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise));
    await filling.promise;
    let waiterFills = 0;
    const waited = waiter.getOrCompute('k', async () => (waiterFills++, 'filled-by-waiter'));
    expect(await eventually(() => store.waitStats().channels === 1, 5000, 2)).toBe(true);
    expect(await connectionsNamed(name)).toBe(2);
    gate.resolve('filled-by-holder');
    expect(await held).toBe('filled-by-holder');
    expect(await within(waited, 5000, 'the waiter answered by the announcement')).toBe('filled-by-holder');
    expect(waiterFills).toBe(0);
    // No poll sleep ever ended (they never do): only announcements moved the waiter.
    expect(store.waitStats().polled).toBe(0);
    expect(store.waitStats().woken).toBeGreaterThanOrEqual(1);
    expect(clock.sleeps.length).toBeGreaterThanOrEqual(1);

    await waiter.close();
    expect(store.waitStats().listening).toBe(false);
    expect(await eventually(async () => (await connectionsNamed(name)) === 1, 5000, 10)).toBe(true);
    expect(client.status).toBe('ready'); // the user's client is left alone
    await holder.close();
  },
);

it('subscriber: false opens nothing, and its waiters poll', async () => {
  const prefix = randomPrefix('sub-false');
  const holderClient = await connect();
  connections.push(holderClient);
  const holder = createCache({ store: redisStore({ client: holderClient, prefix }), ttl: 60_000 });
  const { client, name } = await namedClient();
  const store = redisStore({ client, prefix, subscriber: false });
  expect(store.lock.watch).toBeUndefined();
  const waiter = createCache({ store, ttl: 60_000, lockPollInterval: 5, lockWaitTimeout: 60_000 });
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  const waited = waiter.getOrCompute('k', async () => 'filled-by-waiter');
  expect(await eventually(() => waiter.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  gate.resolve('filled-by-holder');
  await held;
  expect(await waited).toBe('filled-by-holder');
  expect(await connectionsNamed(name)).toBe(1);
  expect(store.waitStats()).toMatchObject({ enabled: false, owned: false });
  await waiter.close();
  await holder.close();
});

it("the store's own subscriber goes when the user quits the client, without cache.close()", async () => {
  const prefix = randomPrefix('sub-end');
  const { client, name } = await namedClient();
  const store = redisStore({ client, prefix });
  // A watch opens the connection as a wait would.
  const watch = store.lock.watch!(['k']);
  expect(await eventually(() => store.waitStats().channels === 1, 5000, 2)).toBe(true);
  expect(await connectionsNamed(name)).toBe(2);
  watch.close();
  await client.quit();
  expect(await eventually(async () => (await connectionsNamed(name)) === 0, 5000, 10)).toBe(true);
  expect(store.waitStats().listening).toBe(false);
});

// ioredis cut in its handshake (socket up, ready check in flight) fails the ready check afterwards
// and disconnects the closed socket again ("Ready check failed"), which leaves its own 2 s destroy
// timer holding the process open: a process closing its cache right after its first locked fill
// took 2 s to exit. close() lets the handshake finish first.
it('cache.close() while the own subscriber is mid-handshake: it is disconnected once, not again by a failed ready check', async () => {
  const { client } = await namedClient();
  let subscriber: Redis | undefined;
  // ioredis's failed ready check disconnects again (disconnect(true)): that second call on the
  // closed socket is what leaves the destroy timer behind.
  const disconnects: unknown[][] = [];
  let statusAtClose: string | undefined;
  let closed: Promise<void> | undefined;
  const duplicate = client.duplicate.bind(client);
  // The close is made in the subscriber's 'connect' event itself (socket up, ready check not yet
  // sent): awaited, the handshake of a fast machine could be over before the close.
  client.duplicate = ((...args: Parameters<Redis['duplicate']>) => {
    const sub = duplicate(...args);
    subscriber = sub;
    const disconnect = sub.disconnect.bind(sub);
    sub.disconnect = (...more: Parameters<Redis['disconnect']>) => (disconnects.push(more), disconnect(...more));
    sub.once('connect', () => {
      statusAtClose = sub.status;
      closed = cache.close();
    });
    return sub;
  }) as Redis['duplicate'];
  const cache = createCache({ store: redisStore({ client, prefix: randomPrefix('sub-handshake') }), ttl: 60_000 });
  const gate = deferred<string>();
  const filled = cache.getOrCompute('k', () => gate.promise);
  filled.catch(() => undefined);
  expect(await eventually(() => closed !== undefined, 5000, 1)).toBe(true);
  const sub = subscriber as Redis;
  connections.push(sub);
  expect(statusAtClose).toBe('connect'); // socket up, handshake in flight
  gate.resolve('v');
  await expect(filled).rejects.toMatchObject({ code: 'E_CLOSED' }); // close() abandons the fill
  await closed;
  if (sub.status !== 'end') await new Promise((resolve) => sub.once('end', resolve));
  // The failed ready check comes right after the socket closes: a few event-loop turns.
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  expect(disconnects).toEqual([[]]);
});

/**
 * ioredis 5's disconnect() on a client that is itself reconnecting (Redis down) stops its retries
 * but emits no 'end': the store's own subscriber, reconnecting too, kept retrying, and its timer
 * kept a process that had quit its client (without cache.close()) alive for good. Before its next
 * retry it now sees the user's client closed and closes itself.
 */
it('the user’s client disconnected while Redis is down: the store’s own subscriber stops retrying', async () => {
  const port = await freePort(); // nothing listens there
  const Ioredis = (await import('ioredis')).default;
  const client = new Ioredis({ port, host: '127.0.0.1', retryStrategy: () => 20, maxRetriesPerRequest: 0 });
  client.on('error', () => {});
  connections.push(client);
  let subscriber: Redis | undefined;
  const closing = () => (subscriber as unknown as { manuallyClosing?: boolean }).manuallyClosing === true;
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (...args: Parameters<Redis['duplicate']>) => (subscriber = duplicate(...args));
  const store = redisStore({ client });
  store.lock!.watch!(['k']).close(); // the first wait opens the store's own subscriber
  expect(subscriber).toBeDefined();
  subscriber!.on('error', () => {});
  connections.push(subscriber!);
  expect(await eventually(() => client.status === 'reconnecting', 5_000)).toBe(true);
  client.disconnect();
  // Its next retry finds the user's client closed: it is disconnected (no retry left pending).
  let retried = 0;
  subscriber!.on('reconnecting', () => retried++);
  expect(await eventually(() => retried > 0 || closing(), 5_000)).toBe(true);
  expect(await eventually(closing, 5_000)).toBe(true);
  await store.close?.();
});

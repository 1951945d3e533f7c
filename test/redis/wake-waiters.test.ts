/**
 * Announcements only where someone waits: a lock attempt that finds a key held registers its
 * process as a waiter (`prefix{K}:waiters`, in the same script call), and the fenced write tells
 * the registered processes only, each on its own channel. A fill nobody waits on sends nothing, so
 * Redis output per fill does not grow with the replicas subscribed; a waited-on fill reaches its
 * waiters and no one else. Counted on a server of this file's own (INFO deltas, messages received
 * on each subscriber connection), never timed. Before this, every locked fill was PUBLISHed to
 * every subscribed replica: 297 B of output per un-waited fill at 4 replicas, 4,194 B at 64.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { deferred } from '../helpers';
import { commandCalls, delta, eventually, ownServer, stuckClock, within } from './helpers';

const own = ownServer();
const connection = (): Promise<Redis> => own.connection();

interface Replica {
  store: RedisStore;
  cache: Cache;
  clock: ReturnType<typeof stuckClock>;
  /** Messages its subscriber connection received, on any channel. */
  messages(): number;
}

/** A replica that listens, as every store does by default: its subscriber connection, subscribed. */
async function replica(client: Redis, prefix: string): Promise<Replica> {
  const subscriber = await connection();
  let messages = 0;
  subscriber.on('message', () => messages++);
  const store = redisStore({ client, prefix, subscriber });
  const clock = stuckClock();
  const cache = createCache({ store, ttl: 60_000, clock, lockPollInterval: 10_000, lockWaitTimeout: 60_000 });
  return { store, cache, clock, messages: () => messages };
}

async function fleet(size: number, prefix: string): Promise<Replica[]> {
  const client = await connection();
  const replicas: Replica[] = [];
  for (let i = 0; i < size; i++) replicas.push(await replica(client, prefix));
  expect(await eventually(() => replicas.every((r) => r.store.waitStats().channels === 1), 10_000, 5)).toBe(true);
  return replicas;
}

/**
 * The server's total output so far, not counting the reply that tells it (`INFO stats` is counted
 * once written, in the next reading): a RESP bulk string, `$<length>\r\n<info>\r\n`.
 */
async function outputBytes(): Promise<number> {
  const info = await own.admin.info('stats');
  const length = Buffer.byteLength(info);
  return Number(/total_net_output_bytes:(\d+)/.exec(info)![1]) - (`$${length}\r\n`.length + length + 2);
}

it('fills nobody waits on publish nothing: Redis output per fill is the same at 4, 16 and 64 subscribed replicas', async () => {
  const fills = 20;
  const perFill: Record<number, number> = {};
  const heard: Record<number, number> = {};
  const published: Record<number, number> = {};
  // A pattern subscriber on the whole prefix hears any channel the scripts could publish on.
  const watcher = await connection();
  let watched = 0;
  watcher.on('pmessage', () => watched++);
  await watcher.psubscribe('nf*');
  // The scripts' first calls on this server answer NOSCRIPT, then go as EVAL: not in the counts.
  await createCache({ store: redisStore({ client: await connection(), prefix: 'warm:' }), ttl: 60_000 }).getOrCompute(
    'w',
    async () => 1,
  );
  for (const size of [4, 16, 64]) {
    // Prefixes of one length: the filler's replies have the same bytes for every fleet size.
    const prefix = `nf${String(size).padStart(2, '0')}:`;
    const replicas = await fleet(size, prefix);
    const fillerStore = redisStore({ client: await connection(), prefix });
    const filler = createCache({ store: fillerStore, ttl: 60_000 });
    // Its first locked fill opens its own subscriber (a watch opens before the lock attempt): before
    // the counts, so that connection's ready check (an INFO, longer with more clients) stays out.
    await filler.getOrCompute('first', async () => 0);
    expect(await eventually(() => fillerStore.waitStats().channels === 1, 5000, 2)).toBe(true);
    // INFO commandstats first: its reply (longer as more commands have run) stays out of the bytes.
    const before = { calls: await commandCalls(own.admin), bytes: await outputBytes() };
    for (let i = 0; i < fills; i++) expect(await filler.getOrCompute(`key:${i}`, async () => `v${i}`)).toBe(`v${i}`);
    await replicas[0]!.store.getMany(['key:0']); // the gathered writes leave right after the answers: let them land
    perFill[size] = ((await outputBytes()) - before.bytes) / fills;
    const calls = delta(before.calls, await commandCalls(own.admin));
    published[size] = calls.publish ?? 0;
    heard[size] = replicas.reduce((sum, r) => sum + r.messages(), 0);
    expect(filler.metrics().total).toMatchObject({ fills: fills + 1, lockAcquired: fills + 1 });
    await filler.close();
    for (const r of replicas) await r.cache.close();
    // Their UNSUBSCRIBE replies are output too: all in before the next fleet is measured.
    expect(await eventually(async () => (await own.admin.pubsub('CHANNELS', `${prefix}*`)).length === 0, 5000, 5)).toBe(
      true,
    );
  }
  expect({ published, heard, watched }).toEqual({
    published: { 4: 0, 16: 0, 64: 0 },
    heard: { 4: 0, 16: 0, 64: 0 },
    watched: 0,
  });
  // The same commands for every fleet size; the bytes agree within a byte per fill (measured 98.5 /
  // 99.4 / 99.6 B, varying from run to run by as much: digits in replies). Before: 297 B / 1,078 B / 4,194 B.
  expect(Math.abs(perFill[16]! - perFill[4]!)).toBeLessThanOrEqual(2);
  expect(Math.abs(perFill[64]! - perFill[4]!)).toBeLessThanOrEqual(2);
}, 60_000);

it('a waited-on fill reaches its two waiting processes only, each woken by the message, no poll sleep over', async () => {
  const prefix = 'ww:';
  const [a, b, ...bystanders] = await fleet(5, prefix);
  const holder = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  let waiterFills = 0;
  const waits = [a!, b!].map((r) => r.cache.getOrCompute('k', async () => (waiterFills++, 'by-waiter')));
  expect(
    await eventually(() => a!.cache.metrics().total.lockContended + b!.cache.metrics().total.lockContended === 2, 5000),
  ).toBe(true);
  // Both registered on the lock, in the call that found it held; the marker goes with the lock.
  const [lockTtl, markerTtl, marker] = (await own.admin
    .multi()
    .pttl('ww:{k}:lock')
    .pttl('ww:{k}:waiters')
    .get('ww:{k}:waiters')
    .exec())!.map(([, value]) => value) as [number, number, string];
  expect(marker.split(' ')).toHaveLength(2);
  expect(markerTtl).toBeGreaterThan(0);
  // It expires with the lock: given the lock's PTTL as read in the script, so later by at most the
  // script's own run time (1 ms was seen beside two CPU hogs), never by a lock's length.
  expect(markerTtl).toBeLessThanOrEqual(lockTtl + 50);

  const before = await commandCalls(own.admin);
  gate.resolve('by-holder');
  expect(await held).toBe('by-holder');
  expect(await within(Promise.all(waits), 5000, 'the waiters answered by the message')).toEqual([
    'by-holder',
    'by-holder',
  ]);
  expect(waiterFills).toBe(0);
  for (const r of [a!, b!]) {
    expect(r.store.waitStats()).toMatchObject({ woken: 1, polled: 0, deaf: 0, received: 1 });
    expect(r.clock.sleeps).toEqual([10_000]); // the one sleep, never over
    expect(r.messages()).toBe(1);
  }
  // One PUBLISH per waiting process, carrying the value: the waiters answer from it (wake-values.test.ts).
  expect(delta(before, await commandCalls(own.admin)).publish).toBe(2);
  expect(bystanders.map((r) => r.messages())).toEqual([0, 0, 0]);
  expect(await own.admin.exists('ww:{k}:waiters')).toBe(0);
  for (const r of [a!, b!, ...bystanders]) await r.cache.close();
  await holder.close();
});

it('a waiter whose lock attempt lands just after the write (and its publish, to nobody) is answered by the re-check in that call', async () => {
  const prefix = 'wr:';
  const [waiter, bystander] = await fleet(2, prefix);
  const holder = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  // The waiter read 'k' present (since gone): its read is a plain MGET, and its lock a call of its
  // own (a key it expects missing is read and locked by one script: no write can fall between).
  await waiter!.store.setMany([
    { key: 'k', entry: { value: 'old', freshUntil: Infinity, staleUntil: Infinity }, ttl: 60_000 },
  ]);
  expect((await waiter!.store.getMany(['k']))[0]?.value).toBe('old');
  await own.admin.del('wr:{k}');
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  // The waiter has read the key (a miss); its lock attempt is held back until the holder's
  // write has landed, as if the write (and its publish) ran between the waiter's read and its lock.
  const commands = waiter!.store.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const acquire = commands.herdcacheLockAcquire3!;
  let attempts = 0;
  commands.herdcacheLockAcquire3 = async (...args: unknown[]) => {
    attempts++;
    gate.resolve('by-holder');
    await held;
    expect(await eventually(async () => (await own.admin.get('wr:{k}:lock')) === null, 5000, 2)).toBe(true);
    return acquire.apply(commands, args);
  };
  let waiterFills = 0;
  const waited = waiter!.cache.getOrCompute('k', async () => (waiterFills++, 'by-waiter'));
  // Bounded: the waiter's poll sleeps never end, so only that call's re-read can answer it.
  expect(await within(waited, 5000, 'the late waiter answered by its re-check')).toBe('by-holder');
  expect(attempts).toBe(1);
  expect(waiterFills).toBe(0);
  expect(waiter!.clock.sleeps).toEqual([]);
  expect(waiter!.cache.metrics().total.lockContended).toBe(0);
  expect([waiter!.messages(), bystander!.messages()]).toEqual([0, 0]);
  expect(await own.admin.exists('wr:{k}:waiters')).toBe(0);
  commands.herdcacheLockAcquire3 = acquire;
  for (const r of [waiter!, bystander!]) await r.cache.close();
  await holder.close();
});

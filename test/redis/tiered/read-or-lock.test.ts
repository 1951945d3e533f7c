/**
 * The tiered store's read that also tries the locks of keys missing from both tiers
 * (FillLock.readOrAcquire, src/redis/tiered-lock.ts): a key cold in L1 and L2 costs one L2 call
 * before its fill starts, as on a redisStore (before: an MGET, then a lock call), and what that
 * call finds is copied into L1 as getMany's finds are. Counted on a server of this file's own
 * (INFO commandstats, socket writes), never timed.
 */
import { redisStore } from '../../../src/redis/redis-store';
import { deferred } from '../../helpers';
import { commandCalls, countSocketWrites, delta, entry, eventually, ownServer, stuckClock, within } from '../helpers';
import { replica, type Replica } from './helpers';

const own = ownServer();
const replicas: Replica[] = [];

function url(): string {
  const { host, port } = own.admin.options;
  return `redis://${host ?? '127.0.0.1'}:${port}`;
}

async function tiered(prefix: string, cache: Parameters<typeof replica>[0]['cache'] = {}): Promise<Replica> {
  const r = await replica({ prefix, url: url(), cache: { ttl: 60_000, ...cache } });
  replicas.push(r);
  // The scripts go as EVAL the first time on a connection, EVALSHA after: sent once before any count.
  (await r.store.lock.readOrAcquire?.(['warm'], [true], 'w', 1000))?.watch?.close();
  await r.store.lock.acquire(['warm'], 'w', 1000);
  await r.store.lock.writeAndRelease([{ key: 'warm', entry: entry(0, 0, 0), ttl: 1 }], 'w');
  // A first locked fill opens the L2's own subscriber (fill announcements), as a server's first does.
  await r.cache.getOrCompute(`first-${replicas.length}`, async () => 0);
  expect(await eventually(() => r.l2.waitStats().channels === 1, 5000, 2)).toBe(true);
  return r;
}

afterAll(async () => {
  for (const r of replicas) await r.close();
});

it('a key cold in both tiers: its fill starts after one L2 call, the read that takes its lock', async () => {
  const a = await tiered('cold:');
  const before = await commandCalls(own.admin);
  const socket = countSocketWrites(a.client);
  let writesAtFill = -1;
  let commandsAtFill: Record<string, number> = {};
  const value = await a.cache.getOrCompute('k', async () => {
    writesAtFill = socket.count;
    commandsAtFill = delta(before, await commandCalls(own.admin));
    return 'v';
  });
  socket.stop();
  expect(value).toBe('v');
  expect(writesAtFill).toBe(1);
  // One script: the value's GET (missing), then its lock's SET NX PX (won). No MGET, no acquire.
  expect(commandsAtFill).toEqual({ evalsha: 1, get: 1, set: 1 });
  expect(a.cache.metrics().total).toMatchObject({ misses: 2, fills: 2, lockAcquired: 2 }); // with the first
  expect(await eventually(async () => (await own.admin.exists('cold:{k}:lock')) === 0, 5000, 2)).toBe(true);
});

it('a value that read finds in L2 is answered and copied into L1: the next load costs no round trip', async () => {
  const a = await tiered('found:');
  // Written by another replica: this one has no hint that it is there, so its read is the script.
  const other = redisStore({ client: await own.connection(), prefix: 'found:', subscriber: false });
  await other.setMany([{ key: 'k', entry: entry('in-l2'), ttl: 60_000 }]);
  const before = await commandCalls(own.admin);
  let fills = 0;
  expect(await a.cache.getOrCompute('k', async () => (fills++, 'filled'))).toBe('in-l2');
  expect(delta(before, await commandCalls(own.admin))).toEqual({ evalsha: 1, get: 1 });
  expect(await eventually(() => a.store.getSync('k') !== undefined, 5000, 2)).toBe(true);
  const socket = countSocketWrites(a.client);
  expect(await a.cache.getOrCompute('k', async () => (fills++, 'filled'))).toBe('in-l2');
  socket.stop();
  expect(socket.count).toBe(0);
  expect(fills).toBe(0);
});

it('a key another replica holds: that read registers this one as its waiter, woken by the write and answered from it', async () => {
  const holder = await tiered('held:');
  const waiter = await tiered('held:', { clock: stuckClock(), lockPollInterval: 10_000, lockWaitTimeout: 60_000 });
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.cache.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  const before = await commandCalls(own.admin);
  let waiterFills = 0;
  const waited = waiter.cache.getOrCompute('k', async () => (waiterFills++, 'by-waiter'));
  expect(await eventually(() => waiter.cache.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  // One script call read the key, found its lock held and registered this replica.
  const calls = delta(before, await commandCalls(own.admin));
  expect([calls.evalsha, calls.mget ?? 0]).toEqual([1, 0]);
  expect((await own.admin.get('held:{k}:waiters'))?.split(' ')).toHaveLength(1);
  gate.resolve('by-holder');
  expect(await held).toBe('by-holder');
  expect(await within(waited, 5000, 'the waiter answered by the message')).toBe('by-holder');
  expect(waiterFills).toBe(0);
  expect(waiter.l2.waitStats()).toMatchObject({ woken: 1, polled: 0, received: 1 });
});

it('a background refresh that meets another replica lock with the stale value there is not registered as its waiter', async () => {
  const holder = await tiered('refresh:');
  const refresher = await tiered('refresh:', { swr: 60_000, clock: stuckClock(), lockWaitTimeout: 60_000 });
  const gate = deferred<string>();
  const filling = deferred<void>();
  const held = holder.cache.getOrCompute('k', async () => (filling.resolve(), gate.promise));
  await filling.promise;
  // Stale but still served: a load answers it and starts a refresh, which meets the holder's lock.
  await refresher.l2.setMany([{ key: 'k', entry: entry('old', Date.now() - 1000, Date.now() + 60_000), ttl: 60_000 }]);
  expect(await refresher.cache.getOrCompute('k', async () => 'refilled')).toBe('old');
  expect(await eventually(() => refresher.cache.metrics().total.lockContended === 1, 5000, 2)).toBe(true);
  expect(await own.admin.exists('refresh:{k}:waiters')).toBe(0);
  // Fill announcements only (the tiered store's own invalidation messages go on another channel).
  const watcher = await own.connection();
  let announced = 0;
  watcher.on('pmessage', () => announced++);
  await watcher.psubscribe('refresh:filled.*');
  gate.resolve('new');
  expect(await held).toBe('new');
  expect(await eventually(async () => (await own.admin.exists('refresh:{k}:lock')) === 0, 5000, 2)).toBe(true);
  await watcher.ping(); // after any message published with the write
  expect(announced).toBe(0);
  expect(refresher.l2.waitStats().received).toBe(0);
});

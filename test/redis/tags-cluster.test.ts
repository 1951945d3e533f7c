/**
 * Tags and the tiered store on a real local Redis Cluster (three masters, started for this file):
 * tag version keys hash on the tag, so a batch of tags spans slots; reads are one MGET per slot and
 * bumps one script call per slot (a script touching two slots would fail with CROSSSLOT). The tiered
 * store's messages use sharded pub/sub (SPUBLISH/SSUBSCRIBE): they reach the channel's shard only.
 */
import type { Cluster } from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { LateTagged } from '../../src/core/late-tags';
import { hashSlot, tagClockKey } from '../../src/redis/keys';
import { deferred } from '../helpers';
import { tieredStore, type TieredStore } from '../../src/redis/tiered';
import { entry, eventually } from './helpers';
import { startLocalCluster, type LocalCluster } from './local-cluster';

let local: LocalCluster;
let store: RedisStore;

const cluster = (): Promise<Cluster> => local.client();

beforeAll(async () => {
  local = await startLocalCluster('tags-cluster');
  store = redisStore({ client: await cluster(), prefix: 'tc:', commandTimeout: 10_000 }); // patient: counts, not speed
}, 120_000);

afterAll(async () => {
  await local?.stop();
});

const measure = (work: () => Promise<unknown>) => local.measure(work);

const tags = Array.from({ length: 40 }, (_, i) => `User:${i}`);
const slots = new Set(tags.map((tag) => hashSlot(`tc:tag:{${tag}}`))).size;

it('reads the versions of 40 tags with one script call per slot, and bumps them with one per slot (after the tag clock)', async () => {
  expect(slots).toBeGreaterThan(20);
  await store.invalidateTags(['warm']); // EVAL once per node connection, EVALSHA after
  await store.tagVersions(['warm']);
  await store.invalidateTags(tags.slice(0, 3));
  // The 37 tags never read nor bumped have their version keys made by this read (one TIME per call).
  const read = await measure(() => store.tagVersions(tags));
  expect(read).toMatchObject({ get: 40, set: 37, time: 37 });
  expect((read.evalsha ?? 0) + (read.eval ?? 0)).toBe(slots);
  const versions = await store.tagVersions(tags);
  for (const version of versions) expect(version).toBeGreaterThan(1e15);
  const bumps = await measure(() => store.invalidateTags(tags));
  expect(bumps).toMatchObject({ time: slots + 1 }); // one TIME per call: the clock's reading, then each slot's
  // The tag clock's reading first (one call on its master: tag-clock.ts), then one call per slot.
  expect((bumps.evalsha ?? 0) + (bumps.eval ?? 0)).toBe(slots + 1);
  const bumped = await store.tagVersions(tags);
  bumped.forEach((version, i) => expect(version).toBeGreaterThan(versions[i]!));
});

it('through createCache on the cluster: invalidateTags makes the tagged entries misses', async () => {
  const cache = createCache({ ttl: Infinity, store });
  let version = 1;
  const users = cache.loader<number, string>({
    name: 'cu',
    batch: async (ids) => ids.map((id) => `u${id}@${version}`),
    tags: (id) => [`CU:${id}`, 'CU'],
  });
  const ids = Array.from({ length: 20 }, (_, i) => i);
  expect(await users.loadMany(ids)).toEqual(ids.map((id) => `u${id}@1`));
  version = 2;
  await cache.invalidateTags(['CU:3', 'CU:7']);
  expect(await users.loadMany(ids)).toEqual(ids.map((id) => `u${id}@${id === 3 || id === 7 ? 2 : 1}`));
  await cache.invalidateTags(['CU']);
  expect(await users.loadMany(ids)).toEqual(ids.map((id) => `u${id}@2`));
});

it('a late-tagged fill spanning an invalidation on another client: not stored (the tag clock on its master, the tags in theirs)', async () => {
  const [a, b] = [
    redisStore({ client: await cluster(), prefix: 'tcl:', commandTimeout: 10_000 }),
    redisStore({ client: await cluster(), prefix: 'tcl:', commandTimeout: 10_000 }),
  ];
  const [ca, cb] = [createCache({ store: a }), createCache({ store: b })];
  const late = tags.slice(0, 10); // tags in other slots than the clock's and the key's
  const clockSlot = hashSlot(tagClockKey('tcl:'));
  expect(late.filter((tag) => hashSlot(`tcl:tag:{${tag}}`) !== clockSlot).length).toBeGreaterThan(5);
  const c = ca._computation({ ttl: 60_000, label: 'response' });
  const load = (cache: typeof ca, fill: () => unknown) =>
    cache._load<unknown>(c.source, 'page', fill, { ...c.policy, lateTags: true }, undefined, undefined);
  let gate: Promise<void> | undefined;
  let fills = 0;
  let running = 0;
  const fill = async () => {
    const n = ++fills;
    running++;
    if (gate !== undefined) await gate;
    return new LateTagged({ n }, late);
  };
  for (const tag of [late[3]!, late[9]!]) {
    const open = deferred<void>();
    gate = open.promise;
    running = 0;
    const during = load(ca, fill);
    expect(await eventually(() => running > 0, 10_000, 1)).toBe(true);
    expect(running).toBe(1);
    await cb.invalidateTags([tag]);
    open.resolve();
    expect(await during).toEqual({ n: fills });
    gate = undefined;
    expect(await a.getMany(['page'])).toEqual([undefined]); // served, not stored
  }
  expect(await load(cb, fill)).toEqual({ n: 3 });
  expect(await load(ca, fill)).toEqual({ n: 3 }); // nothing moved during this one: stored
  expect(fills).toBe(3);
});

it('tiered on the cluster: a write on one replica drops the other replica L1 copy (sharded pub/sub: SPUBLISH, never PUBLISH)', async () => {
  const replicas: TieredStore[] = [];
  const subscribers: Cluster[] = [];
  for (let i = 0; i < 2; i++) {
    const client = await cluster();
    const subscriber = client.duplicate([], { shardedSubscribers: true });
    subscribers.push(subscriber);
    replicas.push(tieredStore({ l2: redisStore({ client, prefix: 'tct:', commandTimeout: 10_000 }), subscriber }));
  }
  const [a, b] = replicas as [TieredStore, TieredStore];
  expect(await eventually(() => a.subscribed && b.subscribed, 5000, 5)).toBe(true);
  const commands = await local.measure(() => b.setMany([{ key: 'k', entry: entry('v1'), ttl: 60_000 }]));
  // A message goes to the channel's shard only, instead of being broadcast to every node.
  expect(commands.spublish).toBe(1);
  expect(commands.publish).toBeUndefined();
  expect(await eventually(() => a.stats().received === 1, 2000, 1)).toBe(true);
  expect(b.getSync('k')?.value).toBe('v1');
  await a.setMany([{ key: 'k', entry: entry('v2'), ttl: 60_000 }]);
  expect(await eventually(() => b.getSync('k') === undefined, 2000, 1)).toBe(true);
  expect((await b.getMany(['k']))[0]?.value).toBe('v2');
  await a.invalidateTags(['T']);
  expect(await eventually(() => b.stats().received === 2, 2000, 1)).toBe(true);
  for (const replica of replicas) await replica.close();
  for (const subscriber of subscribers) subscriber.disconnect();
});

it('tiered on the cluster: a shard subscriber connection that drops empties L1 (deaf meanwhile), and it hears again once back', async () => {
  const replicas: TieredStore[] = [];
  const subscribers: Cluster[] = [];
  for (let i = 0; i < 2; i++) {
    const client = await cluster();
    const subscriber = client.duplicate([], { shardedSubscribers: true });
    subscribers.push(subscriber);
    replicas.push(tieredStore({ l2: redisStore({ client, prefix: 'tcd:', commandTimeout: 10_000 }), subscriber }));
  }
  const [a, b] = replicas as [TieredStore, TieredStore];
  try {
    expect(await eventually(() => a.subscribed && b.subscribed, 5000, 5)).toBe(true);
    await b.setMany([{ key: 'k', entry: entry('v1'), ttl: 60_000 }]);
    expect(b.getSync('k')?.value).toBe('v1');
    // Another connection of the Cluster ending (an idle one closed, another shard's): not deafness.
    const before = b.stats().l1Clears;
    subscribers[1]!.emit('-node', null, '127.0.0.1:1');
    expect(b.stats().l1Clears).toBe(before);
    expect(b.subscribed).toBe(true);
    expect(b.getSync('k')?.value).toBe('v1');
    const clears = b.stats().l1Clears;
    // Every pub/sub connection on every master: the Cluster sees only '-node', no 'close' or 'end'.
    for (const admin of local.admins) await admin.client('KILL', 'TYPE', 'pubsub');
    // Deaf: its copy goes (a change published now would not reach it).
    expect(await eventually(() => b.getSync('k') === undefined, 5000, 5)).toBe(true);
    expect(b.stats().l1Clears).toBeGreaterThan(clears);
    expect(await eventually(() => a.subscribed && b.subscribed, 10_000, 10)).toBe(true);
    const received = b.stats().received;
    await a.setMany([{ key: 'k', entry: entry('v2'), ttl: 60_000 }]);
    expect(await eventually(() => b.stats().received > received, 5000, 5)).toBe(true);
    expect((await b.getMany(['k']))[0]?.value).toBe('v2');
  } finally {
    for (const replica of replicas) await replica.close();
    for (const subscriber of subscribers) subscriber.disconnect();
  }
}, 30_000);

it('tiered on the cluster: a plain Cluster subscriber (no shardedSubscribers) is refused, naming the fix', async () => {
  const client = await cluster();
  const subscriber = await cluster();
  expect(() => tieredStore({ l2: redisStore({ client, prefix: 'tct2:' }), subscriber })).toThrow(
    /shardedSubscribers: true/,
  );
});

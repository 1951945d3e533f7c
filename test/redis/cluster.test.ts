/**
 * The store on a real local Redis Cluster: three masters (no replicas) started for this file,
 * joined with `redis-cli --cluster create`, removed afterwards. Proves the slot function matches
 * the server's, that batches are grouped by slot (one MGET / one script call per slot), and that
 * a value and its lock always share a slot (a script touching both would fail with CROSSSLOT).
 */
import type Redis from 'ioredis';
import type { Cluster } from 'ioredis';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { hashSlot, taggedKey } from '../../src/redis/keys';
import { entry, recordingReporter } from './helpers';
import { startLocalCluster, type LocalCluster } from './local-cluster';

let local: LocalCluster;
let admins: readonly Redis[];
let cluster: Cluster;
let store: RedisStore;

beforeAll(async () => {
  local = await startLocalCluster('cluster');
  admins = local.admins;
  cluster = await local.client();
  // A patient command timeout: these tests check commands and results, not speed (a loaded machine answers late).
  store = redisStore({ client: cluster, prefix: 'cl:', commandTimeout: 10_000 });
}, 120_000);

afterAll(async () => {
  await local?.stop();
});

const measure = (work: () => Promise<unknown>) => local.measure(work);

const keys = Array.from({ length: 100 }, (_, i) => `key:${i}`);
const slotsOf = (batch: readonly string[]): number => new Set(batch.map((key) => hashSlot(`cl:{${key}}`))).size;

it('computes slots exactly as CLUSTER KEYSLOT does', async () => {
  const samples = [
    '',
    'a',
    'foo{}{bar}',
    'foo{{bar}}zap',
    '{}x',
    'ü€😀',
    'a\ud800b',
    'cl:{key:1}',
    'cl:{key:1}:lock',
    `cl:{${taggedKey('', 256)}}`,
  ];
  for (let i = 0; i < 200; i++) samples.push(`k${i}`, String.fromCharCode(0xd000 + i * 7) + i);
  const server = await Promise.all(samples.map((key) => admins[0]!.cluster('KEYSLOT', key) as Promise<number>));
  expect(samples.map(hashSlot)).toEqual(server);
});

it('reads a 100-key batch with one MGET per hash slot, in parallel, and scatters the answers back', async () => {
  const slots = slotsOf(keys);
  expect(slots).toBeGreaterThan(50);
  const written = keys.filter((_, i) => i % 3 === 0);
  await store.setMany(written.map((key) => ({ key, entry: entry(key), ttl: 60_000 })));
  let found: unknown[] = [];
  const calls = await measure(async () => {
    found = (await store.getMany(keys)).map((e) => e?.value);
  });
  expect(calls).toEqual({ mget: slots });
  expect(found).toEqual(keys.map((key, i) => (i % 3 === 0 ? key : undefined)));
});

it('groups keys that share a hash tag into one MGET', async () => {
  // The registry's keys are strings; a '}' ends the tag, so "user}:1" and "user}:2" share "user".
  const tagged = Array.from({ length: 20 }, (_, i) => `user}:${i}`);
  const calls = await measure(() => store.getMany(tagged));
  expect(calls).toEqual({ mget: 1 });
});

it('writes a batch across slots and nodes with one pipeline per master', async () => {
  const original = cluster.pipeline;
  let pipelines = 0;
  cluster.pipeline = function (this: Cluster, ...args: Parameters<Cluster['pipeline']>) {
    pipelines++;
    return original.apply(this, args);
  };
  let calls: Record<string, number>;
  try {
    calls = await measure(() => store.setMany(keys.map((key) => ({ key, entry: entry(`v:${key}`), ttl: 60_000 }))));
  } finally {
    cluster.pipeline = original;
  }
  expect(pipelines).toBe(3);
  expect(calls).toEqual({ set: 100 });
  expect((await store.getMany(keys)).map((e) => e?.value)).toEqual(keys.map((key) => `v:${key}`));
  const pttl = await cluster.pttl(`cl:{${keys[0]}}`);
  expect(pttl).toBeGreaterThan(50_000);
});

it('runs the lock scripts per slot: NX, re-read, fenced write, release, across all three masters', async () => {
  const fresh = keys.map((key) => `lock:${key}`);
  const slots = slotsOf(fresh);
  await store.setMany([{ key: fresh[5]!, entry: entry('there'), ttl: 60_000 }]);
  // Warm the scripts on every node connection (the first call per connection is EVAL).
  await store.lock.acquire(fresh, 'warm', 10);
  await new Promise((resolve) => setTimeout(resolve, 20));

  let attempts: { won: boolean; entry: unknown }[] = [];
  const acquireCalls = await measure(async () => {
    attempts = await store.lock.acquire(fresh, 'a', 10_000);
  });
  expect(acquireCalls.evalsha).toBe(slots);
  expect(acquireCalls.eval ?? 0).toBe(0);
  expect(attempts.every((attempt) => attempt.won)).toBe(true);
  expect(attempts.map((attempt) => (attempt.entry as { value?: unknown } | undefined)?.value)).toEqual(
    fresh.map((_, i) => (i === 5 ? 'there' : undefined)),
  );

  const lost = await store.lock.acquire(fresh, 'b', 10_000);
  expect(lost.every((attempt) => !attempt.won)).toBe(true);

  // An invalidation of a few keys fences their fills; the rest land.
  await store.delete(fresh.slice(0, 3));
  const landed = await store.lock.writeAndRelease(
    fresh.map((key) => ({ key, entry: entry(`filled:${key}`), ttl: 60_000 })),
    'a',
  );
  expect(landed).toEqual(fresh.map((_, i) => i >= 3));
  expect((await store.getMany(fresh)).map((e) => e?.value)).toEqual(
    fresh.map((key, i) => (i >= 3 ? `filled:${key}` : undefined)),
  );

  await store.lock.acquire(fresh, 'c', 10_000);
  await store.lock.release(fresh, 'not-c');
  expect((await store.lock.acquire(fresh, 'd', 10_000)).some((attempt) => attempt.won)).toBe(false);
  await store.lock.release(fresh, 'c');
  expect((await store.lock.acquire(fresh, 'd', 10_000)).every((attempt) => attempt.won)).toBe(true);
});

it('keeps a value and its lock in one slot for odd keys (no CROSSSLOT)', async () => {
  const odd = ['', '}', '}x', 'a}b', '{a}', 'ü€😀', 'x'.repeat(1000)];
  const reporter = recordingReporter();
  store.bind(reporter);
  const attempts = await store.lock.acquire(odd, 'tok', 10_000);
  expect(attempts.map((attempt) => attempt.won)).toEqual(odd.map(() => true));
  expect(
    await store.lock.writeAndRelease(
      odd.map((key, i) => ({ key, entry: entry(i), ttl: 60_000 })),
      'tok',
    ),
  ).toEqual(odd.map(() => true));
  expect((await store.getMany(odd)).map((e) => e?.value)).toEqual(odd.map((_, i) => i));
  await store.delete(odd);
  expect(await store.getMany(odd)).toEqual(odd.map(() => undefined));
  expect(reporter.decodeErrors).toEqual([]);
});

it('clear() scans every master and removes only this prefix', async () => {
  const other = redisStore({ client: cluster, prefix: 'other:', commandTimeout: 10_000 });
  await other.setMany([{ key: 'keep', entry: entry(1), ttl: 60_000 }]);
  await store.setMany(keys.map((key) => ({ key, entry: entry(1), ttl: 60_000 })));
  await store.lock.acquire(['x', 'y', 'z'], 'tok', 60_000);
  await store.clear();
  const left = await Promise.all(admins.map((admin) => admin.keys('cl:*')));
  expect(left.flat()).toEqual([]);
  expect((await other.getMany(['keep']))[0]?.value).toBe(1);
});

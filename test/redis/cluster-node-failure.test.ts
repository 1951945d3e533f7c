/**
 * Redis Cluster, one master killed: it degrades only its own slots. A batch's slot groups settle
 * on their own and each master has its own breaker, so keys on the healthy masters keep their
 * hits, their fill lock and their writes. On a real local 3-master cluster.
 */
import { Cluster } from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { hashSlot } from '../../src/redis/keys';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { startLocalCluster, type LocalCluster } from './local-cluster';

const PREFIX = 'nf:';
let local: LocalCluster;

beforeAll(async () => {
  local = await startLocalCluster('node-failure');
  // Healthy masters keep answering for their own slots once the dead one is marked failed (by
  // default a cluster with uncovered slots refuses every query after cluster-node-timeout).
  for (const admin of local.admins) await admin.config('SET', 'cluster-require-full-coverage', 'no');
}, 120_000);

afterAll(async () => {
  await local?.stop();
});

/** The master ("host:port") serving a cache key of this store's prefix. */
function masterOf(cluster: Cluster, key: string): string {
  return cluster.slots[hashSlot(`${PREFIX}{${key}}`)]![0]!;
}

/** `count` keys named `label:i` served by masters accepted by `where`. */
function keysOn(cluster: Cluster, label: string, count: number, where: (master: string) => boolean): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) if (where(masterOf(cluster, `${label}:${i}`))) out.push(`${label}:${i}`);
  return out;
}

function replica(cluster: Cluster): { cache: Cache; store: RedisStore } {
  // A patient timeout: on a loaded machine a healthy master may answer late, and its breaker
  // opening would refill its keys, which is not what this test is about. The dead master's calls
  // pay it until its own breaker opens (3 failures), then are refused at once.
  const store = redisStore({
    client: cluster,
    prefix: PREFIX,
    commandTimeout: 1000,
    breaker: { threshold: 3, coolDown: 60_000 },
  });
  return {
    cache: createCache({
      store,
      ttl: 600_000,
      hooks: {
        onStoreError: (e, op) => {
          if (process.env.DBG) console.log(op, (e as Error).message);
        },
      },
    }),
    store,
  };
}

it('startup burst on a Cluster client not ready yet: the loads wait for it, 1 fill across two replicas', async () => {
  const fresh = [0, 1].map(
    () => new Cluster([{ host: '127.0.0.1', port: local.nodes[0]!.port }], { redisOptions: { disconnectTimeout: 10 } }),
  );
  try {
    const errors: unknown[] = [];
    const caches = fresh.map((client) =>
      createCache({
        // A wide call budget: the first calls on a Cluster just ready (slots, scripts loaded) can
        // take longer than 250 ms on a loaded machine; this is about waiting for readiness.
        store: redisStore({ client, prefix: PREFIX, commandTimeout: 2_000 }),
        ttl: 600_000,
        hooks: { onStoreError: (error) => void errors.push(error) },
      }),
    );
    expect(fresh.map((client) => client.status)).not.toContain('ready');
    let fills = 0;
    const loads = caches.flatMap((cache) =>
      Array.from({ length: 30 }, () => cache.getOrCompute('boot', async () => (fills++, 'v'))),
    );
    expect(await Promise.all(loads)).toEqual(loads.map(() => 'v'));
    expect(errors).toEqual([]);
    expect(fills).toBe(1);
  } finally {
    for (const client of fresh) client.disconnect();
  }
});

it('one master killed: warm keys on the healthy masters are never refilled, no load fails, the cold ones fill once fleet-wide', async () => {
  const a = await local.client();
  const b = await local.client();
  const victim = local.nodes[2]!;
  const dead = `127.0.0.1:${victim.port}`;
  const healthy = keysOn(a, 'warm', 10, (master) => master !== dead);
  const doomed = keysOn(a, 'doomed', 2, (master) => master === dead);
  const first = replica(a);
  const second = replica(b);
  const fills = new Map<string, number>();
  const fill = (key: string) => () => {
    fills.set(key, (fills.get(key) ?? 0) + 1);
    return `v:${key}`;
  };
  await Promise.all([...healthy, ...doomed].map((key) => first.cache.getOrCompute(key, fill(key))));
  fills.clear();

  await victim.stop('SIGKILL');

  // 20 rounds, healthy and dead-master keys in the same tick, alternating replicas.
  let failed = 0;
  for (let round = 0; round < 20; round++) {
    const { cache } = round % 2 === 0 ? first : second;
    const results = await Promise.allSettled([...healthy, ...doomed].map((key) => cache.getOrCompute(key, fill(key))));
    failed += results.filter((result) => result.status === 'rejected').length;
  }
  expect(failed).toBe(0);
  expect(healthy.map((key) => fills.get(key) ?? 0)).toEqual(healthy.map(() => 0));
  expect(doomed.every((key) => (fills.get(key) ?? 0) >= 1)).toBe(true);

  // Fleet-wide single flight still holds on the healthy masters during the outage.
  fills.clear();
  const cold = keysOn(a, 'cold', 10, (master) => master !== dead);
  const loads = [first, second].flatMap(({ cache }) =>
    [...cold, ...doomed].map((key) => cache.getOrCompute(key, fill(key))),
  );
  expect((await Promise.allSettled(loads)).filter((result) => result.status === 'rejected')).toEqual([]);
  expect(cold.map((key) => fills.get(key))).toEqual(cold.map(() => 1));

  // The health view names the dead master; the healthy ones have no failure.
  const health = first.store.nodeHealth();
  expect(health[dead]).toMatchObject({ breaker: 'open' });
  expect(health[dead]!.failures).toBeGreaterThanOrEqual(3);
  for (const [node, state] of Object.entries(health))
    if (node !== dead) expect(state).toEqual({ breaker: 'closed', failures: 0 });
  // The store's health summary: one master skipped is "open"; nodeHealth() said which.
  expect(first.store.breakerState).toBe('open');
  // Counters: every failure was counted (the dead master's groups), none failed a load.
  expect(first.cache.metrics().total.storeErrors).toBeGreaterThan(0);
}, 60_000);

/**
 * Redis Cluster failover under load: 3 masters with one replica each, one master SIGKILLed while
 * two replicas of the application load keys every 50 ms; its replica is promoted (node timeout
 * 1 s). No load fails, none waits past lockWaitTimeout, and once the promoted replica serves the
 * slots the keys it replicated are hits again. The figures are printed (fills during the outage).
 */
import type { Cluster } from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { hashSlot } from '../../src/redis/keys';
import { redisStore } from '../../src/redis/redis-store';
import { eventually, sleep } from './helpers';
import { startLocalCluster, type LocalCluster } from './local-cluster';

const PREFIX = 'fo:';
const LOCK_WAIT = 2000;
// A patient timeout: on a loaded machine (two CPU hogs, a shared runner) a healthy master was seen
// answering a getMany 500 ms late in the seconds after the kill (the cluster's failure detection and
// resync compete for the cores); its breaker then opened and refilled its keys, which is not what
// this test is about (its own failure refilling them is correct degradation). The dead master's
// calls pay this until its breaker opens (3 failures), then are refused at once.
const COMMAND_TIMEOUT = 2000;
let local: LocalCluster;

beforeAll(async () => {
  local = await startLocalCluster('failover', { replicas: 1, nodeTimeout: 1000 });
  // A replica that never synced cannot be promoted; the first sync waits repl-diskless-sync-delay (5 s).
  const synced = await eventually(
    async () => {
      const infos = await Promise.all(local.admins.map((admin) => admin.info('replication')));
      return infos
        .filter((info) => info.includes('role:slave'))
        .every((info) => info.includes('master_link_status:up'));
    },
    30_000,
    200,
  );
  if (!synced) throw new Error('the replicas did not sync');
  // By default the whole cluster refuses queries between the master's FAIL and the promotion.
  for (const admin of local.admins) await admin.config('SET', 'cluster-require-full-coverage', 'no');
}, 120_000);

afterAll(async () => {
  await local?.stop();
});

function app(cluster: Cluster): Cache {
  const store = redisStore({
    client: cluster,
    prefix: PREFIX,
    commandTimeout: COMMAND_TIMEOUT,
    breaker: { threshold: 3, coolDown: 500 },
  });
  return createCache({ store, ttl: 600_000, lockWaitTimeout: LOCK_WAIT });
}

it('a master fails over to its replica under load: 0 failed loads, no wait past lockWaitTimeout, hits again after promotion', async () => {
  const a = await local.client();
  const b = await local.client();
  const apps = [app(a), app(b)];
  const keys = Array.from({ length: 30 }, (_, i) => `k:${i}`);
  const master = (key: string): string => a.slots[hashSlot(`${PREFIX}{${key}}`)]![0]!;
  const fills = new Map<string, number>();
  const fill = (key: string) => async () => {
    fills.set(key, (fills.get(key) ?? 0) + 1);
    await sleep(5);
    return `v:${key}`;
  };
  await Promise.all(keys.map((key) => apps[0]!.getOrCompute(key, fill(key))));
  // Replication is asynchronous: give the replicas the warm values before the kill.
  for (const admin of local.admins) await admin.wait(0, 1000).catch(() => undefined);
  await sleep(200);
  fills.clear();

  const victimAddress = master(keys[0]!);
  const victim = local.nodes.find((node) => `127.0.0.1:${node.port}` === victimAddress)!;
  const onVictim = keys.filter((key) => master(key) === victimAddress);
  await victim.stop('SIGKILL');
  const killedAt = Date.now();

  let failed = 0;
  let slowest = 0;
  let rounds = 0;
  let promotedAfter: number | undefined;
  const healthyAdmin = local.admins.find((_, i) => local.nodes[i] !== victim)!;
  while (Date.now() - killedAt < 15_000) {
    rounds++;
    const started = performance.now();
    const results = await Promise.allSettled(
      apps.flatMap((cache) => keys.map((key) => cache.getOrCompute(key, fill(key)))),
    );
    slowest = Math.max(slowest, performance.now() - started);
    failed += results.filter((result) => result.status === 'rejected').length;
    if (promotedAfter === undefined) {
      const slots = (await healthyAdmin.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
      const slot = hashSlot(`${PREFIX}{${keys[0]}}`);
      const owner = slots.find(([from, to]) => slot >= from && slot <= to)?.[2];
      if (owner !== undefined && `${owner[0]}:${owner[1]}` !== victimAddress) promotedAfter = Date.now() - killedAt;
    } else if (Date.now() - killedAt > promotedAfter + 3000) {
      break;
    }
    await sleep(50);
  }
  expect(promotedAfter).toBeDefined();
  expect(failed).toBe(0);
  expect(slowest).toBeLessThan(LOCK_WAIT + 4 * COMMAND_TIMEOUT + 2000);
  const outage = [...fills.entries()];
  const onHealthy = outage.filter(([key]) => !onVictim.includes(key)).reduce((sum, [, count]) => sum + count, 0);
  const onDead = outage.filter(([key]) => onVictim.includes(key)).reduce((sum, [, count]) => sum + count, 0);

  // The clients have found the promoted replica: a full round of both apps is all hits.
  fills.clear();
  expect(
    await eventually(
      async () => {
        fills.clear();
        await Promise.all(apps.flatMap((cache) => keys.map((key) => cache.getOrCompute(key, fill(key)))));
        return fills.size === 0;
      },
      10_000,
      200,
    ),
  ).toBe(true);
  console.log(
    `failover: promoted after ${promotedAfter} ms, ${rounds} rounds × ${2 * keys.length} loads, failed ${failed}, slowest round ${Math.round(slowest)} ms; ` +
      `fills during the outage: ${onDead} over ${onVictim.length} keys of the dead master, ${onHealthy} over ${keys.length - onVictim.length} healthy keys`,
  );
  expect(onHealthy).toBe(0);
}, 90_000);

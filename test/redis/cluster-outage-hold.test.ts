/**
 * Redis Cluster, one master stalled: a read that fails for that master's keys only (the others
 * answer) is a partial failure. The keys of the failed part are served what this process filled
 * while the store could not take them (the outage hold, core/outage), as when a read fails as a
 * whole: about one fill per key per second per process, not one per load. Counted: fills of a
 * key on the stalled master, loaded beside a key on a healthy one (one read for both).
 */
import type { Cluster } from 'ioredis';
import { createCache } from '../../src/core/cache';
import { OUTAGE_HOLD_MS } from '../../src/core/outage';
import { hashSlot } from '../../src/redis/keys';
import { redisStore } from '../../src/redis/redis-store';
import { startLocalCluster, type LocalCluster } from './local-cluster';

const PREFIX = 'oh:';
let local: LocalCluster;

beforeAll(async () => {
  local = await startLocalCluster('outage-hold');
}, 120_000);

afterAll(async () => {
  for (const node of local?.nodes ?? []) {
    try {
      process.kill(node.pid, 'SIGCONT');
    } catch {
      // gone
    }
  }
  await local?.stop();
});

const masterOf = (cluster: Cluster, key: string): string => cluster.slots[hashSlot(`${PREFIX}{${key}}`)]![0]!;

it('keys of a stalled master, read beside healthy ones, are filled about once per hold, not once per load', async () => {
  const cluster = await local.client();
  const store = redisStore({
    client: cluster,
    prefix: PREFIX,
    commandTimeout: 100,
    breaker: { threshold: 2, coolDown: 60_000 },
  });
  const cache = createCache({ store, ttl: 600_000 });
  const stalledNode = local.nodes[0]!;
  const stalledAt = `127.0.0.1:${stalledNode.port}`;
  let stalled = '';
  let healthy = '';
  for (let i = 0; stalled === '' || healthy === ''; i++) {
    const key = `k:${i}`;
    if (masterOf(cluster, key) === stalledAt) stalled ||= key;
    else healthy ||= key;
  }
  const fills: Record<string, number> = {};
  const fill = (key: string) => async () => ((fills[key] = (fills[key] ?? 0) + 1), `v:${key}`);
  process.kill(stalledNode.pid, 'SIGSTOP');
  const started = Date.now();
  let rounds = 0;
  try {
    // Each round reads both keys in one read (same tick): the stalled master's part fails.
    while (rounds < 40) {
      const values = await Promise.all([
        cache.getOrCompute(stalled, fill(stalled)),
        cache.getOrCompute(healthy, fill(healthy)),
      ]);
      expect(values).toEqual([`v:${stalled}`, `v:${healthy}`]);
      rounds++;
    }
  } finally {
    process.kill(stalledNode.pid, 'SIGCONT');
  }
  const elapsed = Date.now() - started;
  // One fill per hold period (plus the first), far from one per round.
  expect(fills[stalled]).toBeLessThanOrEqual(Math.ceil(elapsed / OUTAGE_HOLD_MS) + 1);
  expect(fills[stalled]).toBeLessThan(rounds / 4);
  expect(fills[healthy]).toBe(1); // stored on its healthy master: hits
  await cache.close();
}, 60_000);

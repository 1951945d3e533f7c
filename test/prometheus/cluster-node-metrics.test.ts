/**
 * herdcacheMetrics() and a Redis Cluster: each master's own breaker and failed calls, labelled by
 * its address, the first `maxNodes` per store kept and the rest summed as "other". On a real local
 * 3-master cluster, one master killed.
 */
import type { Cluster } from 'ioredis';
import { Registry } from 'prom-client';
import { createCache } from '../../src/core';
import { NODE_BREAKER_METRIC, NODE_FAILURES_METRIC, herdcacheMetrics } from '../../src/prometheus';
import { redisStore } from '../../src/redis';
import { hashSlot } from '../../src/redis/keys';
import { startLocalCluster, type LocalCluster } from '../redis/local-cluster';

const PREFIX = 'nm:';
let local: LocalCluster;

beforeAll(async () => {
  local = await startLocalCluster('node-metrics');
}, 120_000);

afterAll(async () => {
  await local?.stop();
});

/** The first cache key (`label:i`) this store puts on `master`. */
function keyOn(cluster: Cluster, label: string, master: string): string {
  for (let i = 0; ; i++) if (cluster.slots[hashSlot(`${PREFIX}{${label}:${i}}`)]![0] === master) return `${label}:${i}`;
}

/** The samples of the scrape whose name starts with `prefix`, as a map. */
async function samples(registry: Registry, prefix: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const line of (await registry.metrics()).split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

it('per master: its breaker state and failed calls; a killed master shows open, past maxNodes the rest is "other"', async () => {
  const cluster = await local.client();
  const masters = local.nodes.map((node) => `127.0.0.1:${node.port}`);
  const [victim, kept, summed] = masters as [string, string, string];
  const store = redisStore({
    client: cluster,
    prefix: PREFIX,
    commandTimeout: 2000,
    breaker: { threshold: 2, coolDown: 600_000 },
  });
  const cache = createCache({ store, ttl: 600_000 });
  const registry = new Registry();
  await herdcacheMetrics({ cache, registry, stores: [store], maxNodes: 2 });
  expect(await samples(registry, NODE_BREAKER_METRIC)).toEqual({});

  // One load per master, in this order: the store meets the victim first, `summed` last.
  for (const master of masters) await cache.getOrCompute(keyOn(cluster, 'warm', master), () => master);
  expect(Object.keys(store.nodeHealth())).toEqual(masters);
  const node = (address: string) => `${NODE_BREAKER_METRIC}{store="redis",node="${address}"`;
  expect(await samples(registry, NODE_BREAKER_METRIC)).toEqual({
    [`${node(victim)},state="closed"}`]: 1,
    [`${node(victim)},state="open"}`]: 0,
    [`${node(victim)},state="half-open"}`]: 0,
    [`${node(kept)},state="closed"}`]: 1,
    [`${node(kept)},state="open"}`]: 0,
    [`${node(kept)},state="half-open"}`]: 0,
    [`${node('other')},state="closed"}`]: 1,
    [`${node('other')},state="open"}`]: 0,
    [`${node('other')},state="half-open"}`]: 0,
  });

  await local.nodes[0]!.stop('SIGKILL');
  // Loads of the victim's keys: each fails its calls there (computed all the same) until its breaker opens.
  for (let i = 0; i < 10 && store.nodeHealth()[victim]!.breaker !== 'open'; i++) {
    expect(await cache.getOrCompute(keyOn(cluster, `cold${i}`, victim), () => 'computed')).toBe('computed');
  }
  const health = store.nodeHealth();
  expect(health[victim]!.failures).toBeGreaterThanOrEqual(2);
  expect(await samples(registry, NODE_BREAKER_METRIC)).toMatchObject({
    [`${node(victim)},state="open"}`]: 1,
    [`${node(victim)},state="closed"}`]: 0,
    [`${node(kept)},state="closed"}`]: 1,
  });
  // Equal to the snapshot (a healthy master too slow on a loaded machine may have a failure).
  expect(await samples(registry, NODE_FAILURES_METRIC)).toEqual({
    [`${NODE_FAILURES_METRIC}{store="redis",node="${victim}"}`]: health[victim]!.failures,
    [`${NODE_FAILURES_METRIC}{store="redis",node="${kept}"}`]: health[kept]!.failures,
    [`${NODE_FAILURES_METRIC}{store="redis",node="other"}`]: health[summed]!.failures,
  });
  expect((await registry.metrics()).includes(summed)).toBe(false); // the third master is only ever "other"
}, 60_000);

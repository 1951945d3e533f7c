/**
 * Tags and the tiered store on a real local Redis Cluster (three masters, started for this file):
 * tag version keys hash on the tag, so a batch of tags spans slots; reads are one MGET per slot and
 * bumps one script call per slot (a script touching two slots would fail with CROSSSLOT). Pub/sub
 * crosses the cluster: a subscriber on one node hears a PUBLISH sent to another.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Redis, { Cluster } from 'ioredis';
import { createCache } from '../../src/cache';
import { redisStore, type RedisStore } from '../../src/stores/redis';
import { hashSlot } from '../../src/stores/redis-keys';
import { tieredStore, type TieredStore } from '../../src/stores/tiered';
import { freePort, startRedisServer, type RedisServer } from '../setup/redis-server';
import { commandCalls, connect, entry, eventually } from './helpers';

const run = promisify(execFile);

let dir: string;
const nodes: RedisServer[] = [];
const admins: Redis[] = [];
const clusters: Cluster[] = [];
let store: RedisStore;

function cluster(): Promise<Cluster> {
  const client = new Cluster([{ host: '127.0.0.1', port: nodes[0]!.port }], { redisOptions: { disconnectTimeout: 10 } });
  clusters.push(client);
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve(client));
    client.once('error', reject);
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'herdcache-tags-cluster-'));
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const busPort = await freePort();
    nodes.push(
      await startRedisServer({
        port,
        extraArgs: ['--cluster-enabled', 'yes', '--cluster-port', String(busPort), '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--dir', dir],
      }),
    );
  }
  await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 20_000 });
  for (const node of nodes) admins.push(await connect(node.url));
  const ok = await eventually(async () => {
    const states = await Promise.all(admins.map((admin) => admin.cluster('INFO') as Promise<string>));
    return states.every((info) => info.includes('cluster_state:ok'));
  }, 15_000, 100);
  if (!ok) throw new Error('the local cluster did not reach cluster_state:ok');
  store = redisStore({ client: await cluster(), prefix: 'tc:' });
}, 45_000);

afterAll(async () => {
  for (const client of clusters) client.disconnect();
  for (const admin of admins) admin.disconnect();
  await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function measure(work: () => Promise<unknown>): Promise<Record<string, number>> {
  const sum = async () => {
    const out: Record<string, number> = {};
    for (const admin of admins) for (const [name, count] of Object.entries(await commandCalls(admin))) out[name] = (out[name] ?? 0) + count;
    return out;
  };
  const before = await sum();
  await work();
  const after = await sum();
  const out: Record<string, number> = {};
  for (const [name, count] of Object.entries(after)) if (count - (before[name] ?? 0) > 0 && name !== 'info') out[name] = count - (before[name] ?? 0);
  return out;
}

const tags = Array.from({ length: 40 }, (_, i) => `User:${i}`);
const slots = new Set(tags.map((tag) => hashSlot(`tc:tag:{${tag}}`))).size;

it('reads the versions of 40 tags with one MGET per slot, and bumps them with one script call per slot', async () => {
  expect(slots).toBeGreaterThan(20);
  await store.invalidateTags(['warm']); // EVAL once per node connection, EVALSHA after
  await store.invalidateTags(tags.slice(0, 3));
  expect(await measure(() => store.tagVersions(tags))).toEqual({ mget: slots });
  expect(await store.tagVersions(tags)).toEqual(tags.map((_, i) => (i < 3 ? 1 : 0)));
  const bumps = await measure(() => store.invalidateTags(tags));
  expect(bumps).toMatchObject({ incr: 40, pexpire: 40 });
  expect((bumps.evalsha ?? 0) + (bumps.eval ?? 0)).toBe(slots);
  expect(await store.tagVersions(tags)).toEqual(tags.map((_, i) => (i < 3 ? 2 : 1)));
});

it('through createCache on the cluster: invalidateTags makes the tagged entries misses', async () => {
  const cache = createCache({ store });
  let version = 1;
  const users = cache.loader<number, string>({ name: 'cu', batch: async (ids) => ids.map((id) => `u${id}@${version}`), tags: (id) => [`CU:${id}`, 'CU'] });
  const ids = Array.from({ length: 20 }, (_, i) => i);
  expect(await users.loadMany(ids)).toEqual(ids.map((id) => `u${id}@1`));
  version = 2;
  await cache.invalidateTags(['CU:3', 'CU:7']);
  expect(await users.loadMany(ids)).toEqual(ids.map((id) => `u${id}@${id === 3 || id === 7 ? 2 : 1}`));
  await cache.invalidateTags(['CU']);
  expect(await users.loadMany(ids)).toEqual(ids.map((id) => `u${id}@2`));
});

it('tiered on the cluster: a write on one replica drops the other replica L1 copy (pub/sub crosses nodes)', async () => {
  const replicas: TieredStore[] = [];
  for (let i = 0; i < 2; i++) {
    const client = await cluster();
    const subscriber = await cluster();
    replicas.push(tieredStore({ l2: redisStore({ client, prefix: 'tct:' }), subscriber }));
  }
  const [a, b] = replicas as [TieredStore, TieredStore];
  expect(await eventually(() => a.subscribed && b.subscribed, 5000, 5)).toBe(true);
  await b.setMany([{ key: 'k', entry: entry('v1'), ttl: 60_000 }]);
  expect(await eventually(() => a.stats().received === 1, 2000, 1)).toBe(true);
  expect(b.getSync('k')?.value).toBe('v1');
  await a.setMany([{ key: 'k', entry: entry('v2'), ttl: 60_000 }]);
  expect(await eventually(() => b.getSync('k') === undefined, 2000, 1)).toBe(true);
  expect((await b.getMany(['k']))[0]?.value).toBe('v2');
  await a.invalidateTags(['T']);
  expect(await eventually(() => b.stats().received === 2, 2000, 1)).toBe(true);
  for (const replica of replicas) await replica.close();
});

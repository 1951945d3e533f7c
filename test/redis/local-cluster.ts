/**
 * A real local Redis Cluster for one test file: three masters (no replicas) on free loopback
 * ports, joined with `redis-cli --cluster create`, waited on until cluster_state:ok, and removed
 * by stop(). Also sums INFO commandstats over the masters.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Redis, { Cluster } from 'ioredis';
import { freePort, startRedisServer, type RedisServer } from '../setup/redis-server';
import { commandCalls, connect, delta, eventually } from './helpers';

const run = promisify(execFile);

export interface LocalCluster {
  readonly nodes: readonly RedisServer[];
  /** One plain connection per master, for INFO and admin commands. */
  readonly admins: readonly Redis[];
  /** A new ioredis Cluster client, ready; closed by stop(). */
  client(): Promise<Cluster>;
  /** Calls per command, summed over the masters. */
  calls(): Promise<Record<string, number>>;
  /** The commands the masters ran during `work` (INFO excluded). */
  measure(work: () => Promise<unknown>): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

export interface LocalClusterOptions {
  /** Replicas per master (each master gets this many; failover needs at least 1). Default 0. */
  replicas?: number;
  /** cluster-node-timeout in ms: how soon a dead master is failed over. Default Redis's (15 s). */
  nodeTimeout?: number;
  /** More redis-server arguments for every node (e.g. a command renamed away). */
  extraArgs?: string[];
}

export async function startLocalCluster(label: string, options: LocalClusterOptions = {}): Promise<LocalCluster> {
  const replicas = options.replicas ?? 0;
  const dir = await mkdtemp(join(tmpdir(), `herdcache-${label}-`));
  const nodes: RedisServer[] = [];
  const admins: Redis[] = [];
  const clients: Cluster[] = [];
  const stop = async () => {
    for (const client of clients) client.disconnect();
    for (const admin of admins) admin.disconnect();
    await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    // A free port (or bus port) can be taken by another process between freePort() and the
    // server's bind (other suites start servers in parallel): then the node starts again on others.
    const startNode = async (): Promise<RedisServer> => {
      const port = await freePort();
      // The bus port defaults to port + 10000, which may be taken or past 65535: pick one.
      const busPort = await freePort();
      return startRedisServer({
        port,
        extraArgs: [
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(busPort),
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--dir',
          dir,
          ...(options.nodeTimeout === undefined ? [] : ['--cluster-node-timeout', String(options.nodeTimeout)]),
          ...(options.extraArgs ?? []),
        ],
      });
    };
    for (let i = 0; i < 3 * (1 + replicas); i++) {
      for (let attempt = 1; ; attempt++) {
        try {
          nodes.push(await startNode());
          break;
        } catch (error) {
          if (attempt >= 3 || !/exited before listening/.test(String(error))) throw error;
        }
      }
    }
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 20_000 },
    );
    for (const node of nodes) admins.push(await connect(node.url));
    const ok = await eventually(
      async () => {
        const states = await Promise.all(admins.map((admin) => admin.cluster('INFO') as Promise<string>));
        return states.every((info) => info.includes('cluster_state:ok'));
      },
      15_000,
      100,
    );
    if (!ok) throw new Error('the local cluster did not reach cluster_state:ok');
  } catch (error) {
    await stop();
    throw error;
  }
  const calls = async () => {
    const sum: Record<string, number> = {};
    for (const admin of admins)
      for (const [name, count] of Object.entries(await commandCalls(admin))) sum[name] = (sum[name] ?? 0) + count;
    return sum;
  };
  return {
    nodes,
    admins,
    client() {
      const client = new Cluster([{ host: '127.0.0.1', port: nodes[0]!.port }], {
        redisOptions: { disconnectTimeout: 10 },
      });
      clients.push(client);
      return new Promise((resolve, reject) => {
        client.once('ready', () => resolve(client));
        client.once('error', reject);
      });
    },
    calls,
    async measure(work) {
      const before = await calls();
      await work();
      return delta(before, await calls());
    },
    stop,
  };
}

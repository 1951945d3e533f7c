/**
 * Every process the chaos runner starts (redis-servers, sentinels, replicas) is registered here and
 * killed when the runner ends, however it ends: normal exit, a thrown error, Ctrl-C, or the
 * runner's own deadline. A replica also exits by itself when its IPC channel closes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import Redis from 'ioredis';
import { startRedisServer, type RedisServer, type StartOptions } from '../test/setup/redis-server';

const owned = new Set<ChildProcess>();
const scratch: string[] = [];

export function own(child: ChildProcess): void {
  owned.add(child);
  child.once('exit', () => owned.delete(child));
}

/** SIGKILL to every process still running that this runner started; removes its scratch files. */
export function killAll(): void {
  for (const child of owned) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  owned.clear();
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
}

process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

export async function redisServer(options: StartOptions = {}): Promise<RedisServer> {
  const server = await startRedisServer({
    ...options,
    // DEBUG SLEEP is refused by Redis 7 unless enabled.
    extraArgs: [
      ...(options.sentinelConfig === undefined ? ['--enable-debug-command', 'yes'] : []),
      ...(options.extraArgs ?? []),
    ],
  });
  own(server.process);
  return server;
}

/** A sentinel watching `master` under the name `name`, as managed Redis offerings run them. */
export async function sentinel(name: string, master: RedisServer): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'herdcache-chaos-'));
  scratch.push(dir);
  const config = join(dir, 'sentinel.conf');
  writeFileSync(
    config,
    [
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 10000`,
      `dir ${dir}`,
      '',
    ].join('\n'),
  );
  return redisServer({ sentinelConfig: config });
}

/** A short-lived admin connection that never retries or queues: a chaos action fails loudly. */
export async function admin(port: number): Promise<Redis> {
  const client = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 50 ms until it is true; throws `what` after `timeoutMs`. */
export async function until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** A master, its replica and one sentinel watching them, up: the replica synced, the sentinel sees it. */
export interface SentinelGroup {
  readonly master: RedisServer;
  readonly replica: RedisServer;
  readonly watcher: RedisServer;
  /** A connection to the sentinel, for SENTINEL commands. */
  readonly sentinelAdmin: Redis;
  /** Stops the three servers and the admin connection. */
  stop(): Promise<void>;
}

export async function sentinelGroup(name: string): Promise<SentinelGroup> {
  const master = await redisServer();
  const replica = await redisServer({ extraArgs: ['--replicaof', '127.0.0.1', String(master.port)] });
  const watcher = await sentinel(name, master);
  const sentinelAdmin = await admin(watcher.port);
  const stop = async (): Promise<void> => {
    sentinelAdmin.disconnect();
    for (const server of [watcher, replica, master]) await server.stop('SIGKILL');
  };
  try {
    const replicaAdmin = await admin(replica.port);
    await until('the replica to sync', 10_000, async () =>
      (await replicaAdmin.info('replication')).includes('master_link_status:up'),
    );
    replicaAdmin.disconnect();
    // SENTINEL FAILOVER refuses until the sentinel has found a replica to promote.
    await until('the sentinel to see the replica', 15_000, async () => {
      const replicas = (await sentinelAdmin.call('SENTINEL', 'REPLICAS', name)) as string[][];
      return replicas.some((fields) => fields[fields.indexOf('flags') + 1] === 'slave');
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { master, replica, watcher, sentinelAdmin, stop };
}

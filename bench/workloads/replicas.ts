/**
 * Workload 2, stampede across replicas: R processes sharing one local Redis each fire N
 * concurrent loads of the same cold key at the same instant → fills fleet-wide.
 *
 * A system without a distributed lock fills once per process at best; herdcache's Redis fill
 * lock lets one replica fill while the others poll for its value.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { deleteMatching, connect } from '../lib/redis';
import type { Row, SystemId } from '../lib/report';
import { count, latency, ms, ratio } from '../lib/stats';
import type { WorkerReport, WorkerTask } from './replica-worker';

export interface ReplicasOptions {
  readonly url: string;
  readonly replicas: number;
  readonly loads: number;
  readonly fillMs: number;
}

function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`a replica exited with code ${code}`));
    child.once('exit', onExit);
    child.once('message', (message) => {
      child.off('exit', onExit);
      resolve(message as T);
    });
  });
}

export async function replicas(o: ReplicasOptions): Promise<Row> {
  const worker = join(__dirname, 'replica-worker.ts');
  const children = Array.from({ length: o.replicas }, () =>
    fork(worker, [], { env: { ...process.env, HERDCACHE_BENCH_REDIS: o.url }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
  const run = `bench:replicas:${process.pid}:${Date.now().toString(36)}`;
  try {
    await Promise.all(children.map((c) => nextMessage<string>(c)));
    const systems: SystemId[] = ['noCache', 'dataloaderPerRequest', 'dataloaderShared', 'asyncCacheDedupe', 'bentocache', 'herdcache'];
    const outcomes = new Map<SystemId, { fills: number; p50: number; p99: number; label: string }>();
    for (const system of systems) {
      const task: WorkerTask = { system, prefix: `${run}:${system}:`, loads: o.loads, fillMs: o.fillMs, at: Date.now() + 150 };
      const reports = await Promise.all(
        children.map((c) => {
          const reply = nextMessage<WorkerReport>(c);
          c.send(task);
          return reply;
        }),
      );
      const l = latency(reports.flatMap((r) => r.latencies));
      outcomes.set(system, { fills: reports.reduce((sum, r) => sum + r.fills, 0), p50: l.p50, p99: l.p99, label: reports[0]!.label });
    }
    const cleanup = await connect(o.url);
    await deleteMatching(cleanup, `*${run}*`);
    cleanup.disconnect();

    const cell = (x: { fills: number; p50: number; p99: number }) => `${count(x.fills)} fill${x.fills === 1 ? '' : 's'} · ${ms(x.p50)} / ${ms(x.p99)}`;
    const herd = outcomes.get('herdcache')!;
    const peers = systems.filter((s) => s !== 'herdcache');
    const best = peers.reduce((a, b) => {
      const x = outcomes.get(a)!;
      const y = outcomes.get(b)!;
      return x.fills < y.fills || (x.fills === y.fills && x.p99 <= y.p99) ? a : b;
    });
    const b = outcomes.get(best)!;
    const cells: Row['cells'] = {};
    for (const [id, x] of outcomes) cells[id] = cell(x);
    return {
      workload: '2. Stampede, replicas',
      measure: `${o.replicas} processes × ${count(o.loads)} concurrent loads of 1 cold key, one local Redis, fill ${o.fillMs} ms → fills fleet-wide · p50 / p99`,
      cells,
      ratio: `fills ${herd.fills} vs ${b.fills} (${best})<br>p99 ${ratio(herd.p99 / b.p99)}`,
      notes: [
        `${o.replicas} child processes start their bursts at the same wall-clock instant; latencies merged fleet-wide.`,
        ...[...outcomes.values()].map((x) => `${x.label}: ${cell(x)}`),
        'herdcache: redisStore with its fill lock (default lockPollInterval 50 ms, doubling): replicas that lose the lock poll for the value, which is what their latency shows.',
        `Target: herdcache fills = 1 fleet-wide: ${herd.fills === 1 ? 'met' : 'missed'}.`,
      ],
    };
  } finally {
    for (const c of children) if (c.connected) c.disconnect();
  }
}

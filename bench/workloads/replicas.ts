/**
 * Workload 2, stampede across replicas: R processes sharing one local Redis each fire N
 * concurrent loads of the same cold key at the same instant → fills fleet-wide.
 *
 * A system without a distributed lock fills once per process at best; herdcache's Redis fill
 * lock lets one replica fill while the others wait for its value, woken by the holder's
 * announcement of its write (polling is the fallback).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { deleteMatching, connect } from '../lib/redis';
import type { Row, SystemId } from '../lib/report';
import { count, latency, ms, ratio } from '../lib/stats';
import type { WorkerMessage, WorkerReport, WorkerTask } from './replica-worker';

export interface ReplicasOptions {
  readonly url: string;
  readonly replicas: number;
  readonly loads: number;
  readonly fillMs: number;
  /** Synchronized stampedes per system, each on a fresh key: one run could be luck of timing. */
  readonly trials: number;
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

interface Outcome {
  /** Fills fleet-wide, per trial. */
  readonly fills: number[];
  readonly mean: number;
  readonly p50: number;
  readonly p99: number;
  readonly label: string;
  /** Per trial: ms from the (last) fill's return to the last load answered fleet-wide. */
  readonly wake: number[];
}

function mean(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

function ask<T>(child: ChildProcess, message: WorkerMessage): Promise<T> {
  const reply = nextMessage<T>(child);
  child.send(message);
  return reply;
}

export async function replicas(o: ReplicasOptions): Promise<Row> {
  const worker = join(__dirname, 'replica-worker.ts');
  const children = Array.from({ length: o.replicas }, () =>
    fork(worker, [], {
      env: { ...process.env, HERDCACHE_BENCH_REDIS: o.url },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const run = `bench:replicas:${process.pid}:${Date.now().toString(36)}`;
  try {
    await Promise.all(children.map((c) => nextMessage<string>(c)));
    const systems: SystemId[] = [
      'noCache',
      'dataloaderPerRequest',
      'dataloaderShared',
      'asyncCacheDedupe',
      'bentocache',
      'herdcache',
    ];
    const outcomes = new Map<SystemId, Outcome>();
    for (const system of systems) {
      const fills: number[] = [];
      const latencies: number[] = [];
      const wake: number[] = [];
      let label = '';
      for (let trial = 0; trial < o.trials; trial++) {
        const task: WorkerTask = { system, prefix: `${run}:${system}:${trial}:`, loads: o.loads, fillMs: o.fillMs };
        await Promise.all(children.map((c) => ask<string>(c, { type: 'prepare', task })));
        const at = Date.now() + 50;
        const reports = await Promise.all(children.map((c) => ask<WorkerReport>(c, { type: 'go', at })));
        fills.push(reports.reduce((sum, r) => sum + r.fills, 0));
        for (const r of reports) latencies.push(...r.latencies);
        const fillEnded = Math.max(...reports.map((r) => r.fillEndedAt));
        if (fillEnded > 0) wake.push(Math.max(...reports.map((r) => r.lastAnsweredAt)) - fillEnded);
        label = reports[0]!.label;
      }
      const l = latency(latencies);
      outcomes.set(system, {
        fills,
        mean: fills.reduce((a, b) => a + b, 0) / fills.length,
        p50: l.p50,
        p99: l.p99,
        label,
        wake,
      });
    }
    const cleanup = await connect(o.url);
    await deleteMatching(cleanup, `*${run}*`);
    cleanup.disconnect();

    const cell = (x: Outcome) => {
      const same = x.fills.every((f) => f === x.fills[0]);
      const fills = same
        ? `${count(x.fills[0]!)} fill${x.fills[0] === 1 ? '' : 's'}${x.fills.length > 1 ? ` (each of ${x.fills.length} trials)` : ''}`
        : `fills ${x.fills.map(count).join(' / ')} (per trial)`;
      return `${fills} · ${ms(x.p50)} / ${ms(x.p99)}`;
    };
    const herd = outcomes.get('herdcache')!;
    const acd = outcomes.get('asyncCacheDedupe')!;
    const peers = systems.filter((s) => s !== 'herdcache');
    const best = peers.reduce((a, b) => {
      const x = outcomes.get(a)!;
      const y = outcomes.get(b)!;
      return x.mean < y.mean || (x.mean === y.mean && x.p99 <= y.p99) ? a : b;
    });
    const b = outcomes.get(best)!;
    const cells: Row['cells'] = {};
    for (const [id, x] of outcomes) cells[id] = cell(x);
    const fills: Row['fills'] = {};
    for (const [id, x] of outcomes) fills[id] = x.mean;
    return {
      workload: '2. Stampede, replicas',
      fills,
      measure: `${o.replicas} processes × ${count(o.loads)} concurrent loads of 1 cold key, one local Redis, fill ${o.fillMs} ms, ${o.trials} trials → fills fleet-wide · p50 / p99`,
      cells,
      ratio: `fills ${mean(herd.mean)} vs ${mean(b.mean)} per stampede (${best})<br>p99 ${ratio(herd.p99 / b.p99)}<br>p99 ${ratio(herd.p99 / acd.p99)} async-cache-dedupe (target ≤ 1.25×)<br>write → last waiter ${ms(Math.max(...herd.wake))} (target ≤ 5 ms)`,
      notes: [
        `${o.replicas} child processes; per system ${o.trials} trials, each on a fresh key: every replica builds the system and warms it with 5 bursts of cold keys of its own, then 3 of cold keys shared by the replicas (JIT steady state, the wait for another replica's fill included), then all fire their burst at the same wall-clock instant. Latencies merged over replicas and trials.`,
        ...[...outcomes.values()].map((x) => `${x.label}: ${cell(x)}`),
        "herdcache: redisStore({ client }) as in the README, with its fill lock and the subscriber connection it opens per replica: replicas that lose the lock wait for the holder's announcement of its write (pub/sub), which carries a small value (else they read it in one round trip); polling (50 ms, doubling) is only the fallback.",
        `herdcache, from the fill's return (its write issued) to the last load answered fleet-wide, per trial: ${herd.wake.map((x) => ms(x)).join(' / ')} (target ≤ 5 ms).`,
        'bentocache, async-cache-dedupe and DataLoader have no distributed lock: when they fill fewer than once per replica, it is timing (a replica read the L2 after another wrote it), not coordination.',
        `Target: herdcache fills = 1 fleet-wide: ${herd.fills.every((f) => f === 1) ? 'met' : 'missed'} (${herd.fills.join(' / ')}).`,
      ],
    };
  } finally {
    for (const c of children) if (c.connected) c.disconnect();
  }
}

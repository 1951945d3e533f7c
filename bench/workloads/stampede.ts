/**
 * Workload 1, stampede in one process: N concurrent loads of one cold key whose fill takes
 * `fillMs` → how many fills each system paid, and the latency callers saw.
 *
 * Every system gets a fresh instance and its own database counter. Each first runs two
 * stampedes of the same size on other keys (not counted) so the figures are steady state, not JIT
 * compilation: after one of 1,000 loads, `node --trace-opt` showed herdcache's load path (and
 * async-cache-dedupe's getKey) still completing optimization during the measured burst, whose p99
 * then swung 1.0-3.4x between runs; after two full-size ones nothing of theirs is left to optimize.
 */
import { SlowDb } from '../lib/db';
import {
  asyncCacheDedupe,
  bentocache,
  dataloaderPerRequest,
  dataloaderShared,
  herdcache,
  noCache,
  type Contender,
} from '../lib/peers';
import type { Row, SystemId } from '../lib/report';
import { burst, count, latency, ms, ratio, type Latency } from '../lib/stats';

export interface StampedeOptions {
  readonly loads: number;
  readonly fillMs: number;
}

interface Outcome {
  readonly fills: number;
  readonly latency: Latency;
}

async function measure(
  make: (db: SlowDb) => Contender,
  options: StampedeOptions,
): Promise<Outcome & { label: string }> {
  const db = new SlowDb(options.fillMs);
  const contender = make(db);
  try {
    // A new request per load: per-request systems get a fresh view each time, as under GraphQL.
    for (const key of ['warm-up 1', 'warm-up 2']) await burst(options.loads, () => contender.request()(key));
    db.reset();
    const latencies = await burst(options.loads, () => contender.request()('hot'));
    return { fills: db.rows, latency: latency(latencies), label: contender.label };
  } finally {
    await contender.close();
  }
}

function cell(o: Outcome): string {
  return `${count(o.fills)} fill${o.fills === 1 ? '' : 's'} · ${ms(o.latency.p50)} / ${ms(o.latency.p99)}`;
}

export async function stampede(options: StampedeOptions): Promise<Row> {
  const systems: [SystemId, (db: SlowDb) => Contender][] = [
    ['noCache', noCache],
    ['dataloaderPerRequest', dataloaderPerRequest],
    ['dataloaderShared', (db) => dataloaderShared(db)],
    ['asyncCacheDedupe', (db) => asyncCacheDedupe(db)],
    ['bentocache', (db) => bentocache(db)],
    ['herdcache', (db) => herdcache(db)],
  ];
  const outcomes = new Map<SystemId, Outcome & { label: string }>();
  for (const [id, make] of systems) outcomes.set(id, await measure(make, options));
  const viaGetOrCompute = await measure((db) => herdcache(db, { api: 'getOrCompute' }), options);

  const herd = outcomes.get('herdcache')!;
  const peers = systems.map(([id]) => id).filter((id) => id !== 'herdcache');
  // Best peer: fewest fills, then lowest p99.
  const best = peers.reduce((a, b) => {
    const x = outcomes.get(a)!;
    const y = outcomes.get(b)!;
    return x.fills < y.fills || (x.fills === y.fills && x.latency.p99 <= y.latency.p99) ? a : b;
  });
  const bestOutcome = outcomes.get(best)!;
  // The cost of a coalesced caller: herdcache's scoped loads and getOrCompute next to the peers
  // that coalesce in one process (the burst's issue time is part of every latency).
  const dedupe = outcomes.get('asyncCacheDedupe')!;
  const sharedDl = outcomes.get('dataloaderShared')!;
  const scopedVsDedupe = herd.latency.p99 / dedupe.latency.p99;
  const gocVsDedupe = viaGetOrCompute.latency.p99 / dedupe.latency.p99;
  const cells: Row['cells'] = {};
  for (const [id, o] of outcomes) cells[id] = cell(o);
  cells.herdcache = `${cell(herd)}<br>getOrCompute: ${cell(viaGetOrCompute)}`;
  const fills: Row['fills'] = {};
  for (const [id, o] of outcomes) fills[id] = o.fills;
  return {
    workload: '1. Stampede, one process',
    fills,
    measure: `${count(options.loads)} concurrent loads of 1 cold key, fill ${options.fillMs} ms → fills · p50 / p99`,
    cells,
    ratio: [
      `fills ${herd.fills} vs ${bestOutcome.fills} (${best})<br>p99 ${ratio(herd.latency.p99 / bestOutcome.latency.p99)}`,
      `scoped p99 / async-cache-dedupe ${ratio(scopedVsDedupe)} (target ≤ 1.25×)`,
      `getOrCompute p99 / async-cache-dedupe ${ratio(gocVsDedupe)} (target ≤ 1.1×)`,
      `scoped p99 / DataLoader shared ${ratio(herd.latency.p99 / sharedDl.latency.p99)}`,
    ].join('<br>'),
    notes: [
      `Each load is a new request: per-request systems get a fresh view per load. One burst of ${count(options.loads)} loads issued synchronously; latency is from a load's start to its answer, so it includes waiting for the burst to be issued.`,
      ...[...outcomes].map(([, o]) => `${o.label}: ${cell(o)}`),
      `herdcache ${viaGetOrCompute.label}: ${cell(viaGetOrCompute)}`,
      `Target: herdcache fills = 1: ${herd.fills === 1 && viaGetOrCompute.fills === 1 ? 'met' : 'missed'}.`,
      `Targets (issue 10): scoped loads p99 ≤ 1.25× async-cache-dedupe's: ${scopedVsDedupe <= 1.25 ? 'met' : 'missed'} (${ratio(scopedVsDedupe)}); getOrCompute p99 ≤ 1.1×: ${gocVsDedupe <= 1.1 ? 'met' : 'missed'} (${ratio(gocVsDedupe)}).`,
    ],
  };
}

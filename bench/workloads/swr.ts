/**
 * Workload 5, expiry under load with stale-while-revalidate: steady traffic on a few hot keys for
 * longer than several TTLs → how many requests had to wait for a refill, and how many fills ran.
 *
 * Real time (the peers read Date.now): ttl 1 s and grace 2 s, whole seconds because
 * async-cache-dedupe counts in seconds. A request "waited on a refill" when its latency reached
 * half the fill time: a hit answers in microseconds, a wait takes the fill's `fillMs`.
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
import { count, latency, ms, ratio, sleep } from '../lib/stats';

export interface SwrOptions {
  readonly keys: number;
  readonly fillMs: number;
  readonly ttlMs: number;
  readonly swrMs: number;
  /** How long traffic runs; several TTLs. */
  readonly durationMs: number;
  /** Requests started per tick of `tickMs`. */
  readonly perTick: number;
  readonly tickMs: number;
}

interface Outcome {
  readonly requests: number;
  readonly waited: number;
  readonly fills: number;
  readonly p99: number;
  readonly label: string;
}

async function measure(make: (db: SlowDb) => Contender, o: SwrOptions): Promise<Outcome> {
  const db = new SlowDb(o.fillMs);
  const contender = make(db);
  const keys = Array.from({ length: o.keys }, (_, i) => `hot-${i}`);
  try {
    const warm = contender.request();
    await Promise.all(keys.map((k) => warm(k)));
    db.reset();
    const latencies: number[] = [];
    const pending: Promise<void>[] = [];
    let next = 0;
    const started = Date.now();
    await new Promise<void>((done) => {
      const timer = setInterval(() => {
        for (let j = 0; j < o.perTick; j++) {
          const key = keys[next++ % keys.length]!;
          const t0 = performance.now();
          pending.push(
            contender
              .request()(key)
              .then(() => void latencies.push(performance.now() - t0)),
          );
        }
        if (Date.now() - started >= o.durationMs) {
          clearInterval(timer);
          done();
        }
      }, o.tickMs);
    });
    await Promise.all(pending);
    await sleep(o.fillMs * 2); // let background refreshes land so their fills are counted
    const waited = latencies.filter((l) => l >= o.fillMs / 2).length;
    return { requests: latencies.length, waited, fills: db.rows, p99: latency(latencies).p99, label: contender.label };
  } finally {
    await contender.close();
  }
}

function cell(x: Outcome): string {
  return `${count(x.waited)} of ${count(x.requests)} waited · ${count(x.fills)} fills · p99 ${ms(x.p99)}`;
}

export async function swr(o: SwrOptions): Promise<Row> {
  const freshness = { ttlMs: o.ttlMs, swrMs: o.swrMs };
  const systems: [SystemId, (db: SlowDb) => Contender][] = [
    ['noCache', noCache],
    ['dataloaderPerRequest', dataloaderPerRequest],
    ['dataloaderShared', (db) => dataloaderShared(db, o.ttlMs)],
    ['asyncCacheDedupe', (db) => asyncCacheDedupe(db, freshness)],
    ['bentocache', (db) => bentocache(db, freshness)],
    ['herdcache', (db) => herdcache(db, freshness)],
  ];
  const outcomes = new Map<SystemId, Outcome>();
  for (const [id, make] of systems) outcomes.set(id, await measure(make, o));
  // Early refresh (XFetch) instead of a grace period: hot keys are refreshed before they expire.
  const xfetch = await measure((db) => herdcache(db, { ttlMs: o.ttlMs, earlyRefresh: true }), o);
  const herd = outcomes.get('herdcache')!;
  const peers = systems.map(([id]) => id).filter((id) => id !== 'herdcache');
  const best = peers.reduce((a, b) => {
    const x = outcomes.get(a)!;
    const y = outcomes.get(b)!;
    const wx = x.waited / x.requests;
    const wy = y.waited / y.requests;
    return wx < wy || (wx === wy && (x.fills < y.fills || (x.fills === y.fills && x.p99 <= y.p99))) ? a : b;
  });
  const b = outcomes.get(best)!;
  const cells: Row['cells'] = {};
  for (const [id, x] of outcomes) cells[id] = cell(x);
  cells.herdcache = `swr: ${cell(herd)}<br>earlyRefresh, no grace: ${cell(xfetch)}`;
  return {
    workload: '5. Expiry under load (SWR)',
    measure: `${o.keys} hot keys, ~${count(Math.round(herd.requests / (o.durationMs / 1000)))} req/s for ${(o.durationMs / 1000).toFixed(1)} s, ttl ${o.ttlMs / 1000} s + grace ${o.swrMs / 1000} s, fill ${o.fillMs} ms → requests that waited on a refill · fills · p99`,
    cells,
    ratio: `waited ${count(herd.waited)} vs ${count(b.waited)} (${best})<br>fills ${herd.fills} vs ${b.fills}<br>p99 ${ratio(herd.p99 / b.p99)}`,
    notes: [
      `Warm first (one load per key, not counted). "Waited" means latency ≥ ${o.fillMs / 2} ms (half the fill); a hit takes microseconds. Timer-driven traffic: a tick every ${o.tickMs} ms starts ${o.perTick} requests, each a new request view.`,
      ...[...outcomes.values()].map((x) => `${x.label}: ${cell(x)}`),
      `herdcache with earlyRefresh: true (XFetch, beta 1) and no grace: ${cell(xfetch)}. With no grace, a key nobody read in the last stretch before expiry is a cold miss; XFetch refreshes the keys that are read near expiry.`,
      `Target: herdcache 0 requests wait once warm: ${herd.waited === 0 ? 'met' : 'missed'}.`,
    ],
  };
}

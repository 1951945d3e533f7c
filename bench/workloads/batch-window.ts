/**
 * Workload 8, batchScheduleFn windows under concurrent requests: requests arrive a few per
 * millisecond, each loads a handful of keys through its own request scope (coalesce-only: every
 * key goes to the database), and the database answers one batch call in `fillMs`. Per tick
 * (the default), each tick's keys leave in one call; with a window, the keys of every request
 * arriving within it share one call. Measured: batch calls, keys per call, request latency.
 * The same for DataLoader per request, whose batches never span requests.
 */
import DataLoader from 'dataloader';
import { createCache } from '../../src/core';
import { SlowDb, type Item } from '../lib/db';
import type { Row } from '../lib/report';
import { count, latency, ms, ratio, sleep, type Latency } from '../lib/stats';

export interface BatchWindowOptions {
  /** Requests in all. */
  readonly requests: number;
  /** Requests arriving together every millisecond. */
  readonly perMs: number;
  /** Keys each request loads (from a key space 50 times larger than one wave's). */
  readonly keysPerRequest: number;
  readonly fillMs: number;
}

interface Outcome {
  readonly calls: number;
  readonly rows: number;
  readonly latency: Latency;
}

type Request = (ids: readonly string[]) => Promise<unknown>;

/** Requests arriving `perMs` at a time, one wave per timer tick of ~1 ms; each awaits its loads. */
async function arrivals(options: BatchWindowOptions, request: () => Request): Promise<number[]> {
  const space = options.perMs * options.keysPerRequest * 50;
  let seed = 42;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  for (let sent = 0; sent < options.requests;) {
    for (let i = 0; i < options.perMs && sent < options.requests; i++, sent++) {
      const ids = Array.from({ length: options.keysPerRequest }, () => `k${Math.floor(random() * space)}`);
      const started = performance.now();
      pending.push(request()(ids).then(() => void latencies.push(performance.now() - started)));
    }
    await sleep(1);
  }
  await Promise.all(pending);
  return latencies;
}

async function herdcache(options: BatchWindowOptions, windowMs: number | undefined): Promise<Outcome> {
  const db = new SlowDb(options.fillMs);
  const cache = createCache();
  const items = cache.loader<string, Item>({
    name: 'item',
    batch: (ids) => db.getMany(ids),
    ...(windowMs === undefined
      ? {}
      : { batchScheduleFn: (dispatch: () => void) => void setTimeout(dispatch, windowMs) }),
  });
  const latencies = await arrivals(options, () => {
    const scoped = cache.request().loader(items);
    return (ids) => scoped.loadMany(ids);
  });
  await cache.close();
  return { calls: db.calls, rows: db.rows, latency: latency(latencies) };
}

async function dataloaderPerRequest(options: BatchWindowOptions, windowMs: number | undefined): Promise<Outcome> {
  const db = new SlowDb(options.fillMs);
  const schedule = windowMs === undefined ? undefined : (callback: () => void) => void setTimeout(callback, windowMs);
  const latencies = await arrivals(options, () => {
    const loader = new DataLoader<string, Item>(
      (ids) => db.getMany(ids),
      schedule === undefined ? undefined : { batchScheduleFn: schedule },
    );
    return (ids) => loader.loadMany(ids);
  });
  return { calls: db.calls, rows: db.rows, latency: latency(latencies) };
}

function cell(o: Outcome): string {
  return `${count(o.calls)} calls (${(o.rows / o.calls).toFixed(1)} keys/call) · ${ms(o.latency.p50)} / ${ms(o.latency.p99)}`;
}

export async function batchWindow(options: BatchWindowOptions): Promise<Row> {
  // Warm-up (JIT), not counted.
  await herdcache({ ...options, requests: Math.min(200, options.requests) }, 2);
  const perTick = await herdcache(options, undefined);
  const window2 = await herdcache(options, 2);
  const window5 = await herdcache(options, 5);
  const dataloader = await dataloaderPerRequest(options, undefined);
  const dataloader5 = await dataloaderPerRequest(options, 5);
  return {
    workload: '8. Batch windows (batchScheduleFn) under concurrent requests',
    measure: 'database batch calls · p50 / p99 request latency',
    cells: {
      herdcache: `per tick: ${cell(perTick)}<br>2 ms window: ${cell(window2)}<br>5 ms window: ${cell(window5)}`,
      dataloaderPerRequest: `per tick: ${cell(dataloader)}<br>5 ms window: ${cell(dataloader5)}`,
    },
    ratio: `calls, 5 ms window / per tick: ${ratio(window5.calls / perTick.calls)}; p50 ${ratio(window5.latency.p50 / perTick.latency.p50)}`,
    notes: [
      `${count(options.requests)} requests arriving ${options.perMs} per ~1 ms timer tick, each loading ${options.keysPerRequest} keys (random, from ${count(options.perMs * options.keysPerRequest * 50)}) through its own request scope of a coalesce-only loader (no ttl: every key reaches the database); one database batch call takes ${options.fillMs} ms.`,
      "herdcache per tick: each tick's keys of every request in one call. With `batchScheduleFn: (dispatch) => setTimeout(dispatch, W)` on the shared loader, the keys of every request arriving within W ms share one call: fewer, bigger calls, for up to W ms more latency.",
      'DataLoader per request: a batch never spans requests, so its calls do not shrink with a window; the window only adds latency.',
    ],
  };
}

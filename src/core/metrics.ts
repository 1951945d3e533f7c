/**
 * Counters, per source (a loader name, or "getOrCompute" / a label) and in total.
 *
 * The hit path increments one field of a plain object: the total is summed when a snapshot
 * is taken rather than kept up to date on every load.
 */
import type { Counters, MetricsSnapshot } from './types';

export const COUNTER_NAMES = [
  'hits',
  'misses',
  'coalesced',
  'staleServed',
  'fills',
  'fillFailures',
  'batches',
  'batchedKeys',
  'refreshes',
  'refreshesDropped',
  'lockAcquired',
  'lockContended',
  'lockTimeouts',
  'storeErrors',
  'encodeErrors',
  'decodeErrors',
  'invalidations',
] as const satisfies readonly (keyof Counters)[];

export type CounterName = (typeof COUNTER_NAMES)[number];

export function zeroCounters(): Counters {
  return {
    hits: 0,
    misses: 0,
    coalesced: 0,
    staleServed: 0,
    fills: 0,
    fillFailures: 0,
    batches: 0,
    batchedKeys: 0,
    refreshes: 0,
    refreshesDropped: 0,
    lockAcquired: 0,
    lockContended: 0,
    lockTimeouts: 0,
    storeErrors: 0,
    encodeErrors: 0,
    decodeErrors: 0,
    invalidations: 0,
  };
}

export function addCounters(into: Counters, from: Counters): void {
  for (const name of COUNTER_NAMES) into[name] += from[name];
}

/**
 * Where a load's events are also reported, besides the registry: a request scope uses it to
 * attribute hits, misses and fills to the operation that caused them.
 */
export interface Sink {
  count(source: string, counter: CounterName, n: number): void;
}

/** Counters grouped by source, created on first use. Shared by the registry and request scopes. */
export class CounterSet implements Sink {
  readonly #sources = new Map<string, Counters>();

  of(source: string): Counters {
    let counters = this.#sources.get(source);
    if (counters === undefined) {
      counters = zeroCounters();
      this.#sources.set(source, counters);
    }
    return counters;
  }

  count(source: string, counter: CounterName, n: number): void {
    this.of(source)[counter] += n;
  }

  snapshot(): MetricsSnapshot {
    const total = zeroCounters();
    const sources: Record<string, Counters> = {};
    for (const [name, counters] of this.#sources) {
      sources[name] = { ...counters };
      addCounters(total, counters);
    }
    return { total, sources };
  }
}

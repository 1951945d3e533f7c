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

/**
 * `target[key] = value` as an own, enumerable property whatever `key` is: a source named
 * `__proto__` (a loader's name, a label) assigned plainly would set the object's prototype
 * instead (and a row read back from it would be Object.prototype).
 */
export function setOwn<T>(target: Record<string, T>, key: string, value: T): T {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  return value;
}

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

/** @internal Collects the tags of the values an operation used (its whole response is tagged with them). */
export interface TagNotes {
  noteTags(tags: readonly string[]): void;
}

/**
 * Where a load's events are also reported, besides the registry: a request scope uses it to
 * attribute hits, misses and fills to the operation that caused them.
 */
export interface Sink {
  /** @internal */
  count(source: string, counter: CounterName, n: number): void;
  /**
   * @internal A load of this sink joined `join`'s flight before its outcome was known: the sink
   * counts it under `join.source`'s name by `join.outcome` once that is set (a request scope does
   * so when its stats are read), so the flight's one counting pass does nothing per such caller.
   * Without it the sink is counted in that pass, through count().
   */
  joined?(join: PendingJoin): void;
  /** @internal A load of this sink joined the flight started `seq`-th (Flight.seq: which fill its value came from). */
  joinedFlight?(seq: number): void;
  /** @internal The loader object the caller holds (a scoped loader): batch and key functions get it as `this`. */
  readonly holder?: object;
}

/**
 * @internal A flight as the sinks that joined it see it: how its joiners count (set once, when
 * its store read tells; undefined until then) and the source they count under.
 */
export interface PendingJoin {
  readonly joinedAs: 'hits' | 'staleServed' | 'coalesced' | undefined;
  readonly joinSource: Counted | undefined;
}

/** Who an event counts under: a source (loader, getOrCompute, a label), seen by its name and counters. */
export interface Counted {
  readonly name: string;
  readonly counters: Counters;
}

/** One event of `on`, counted in the registry's counters and, when the load has one, its request scope's. */
export function countOn(on: Counted, counter: CounterName, sink: Sink | undefined): void {
  on.counters[counter]++;
  if (sink !== undefined) sink.count(on.name, counter, 1);
}

/**
 * One dispatch's outcomes counted as runs: consecutive loads of one source and sink by one counter
 * add up here and reach the counters (and the request scope) once per run, not once per key.
 * flush() before anything can read them: the pipeline does so before its loop yields.
 */
export class Tally {
  #on: Counted | undefined = undefined;
  #sink: Sink | undefined = undefined;
  #counter: CounterName = 'hits';
  #n = 0;

  add(on: Counted, counter: CounterName, sink: Sink | undefined): void {
    if (on === this.#on && sink === this.#sink && counter === this.#counter) {
      this.#n++;
      return;
    }
    this.flush();
    this.#on = on;
    this.#sink = sink;
    this.#counter = counter;
    this.#n = 1;
  }

  flush(): void {
    const n = this.#n;
    if (n === 0) return;
    this.#n = 0;
    const on = this.#on!;
    on.counters[this.#counter] += n;
    if (this.#sink !== undefined) this.#sink.count(on.name, this.#counter, n);
  }
}

/**
 * Counters grouped by source, created on first use. Shared by the registry and request scopes.
 * A request usually touches one source: the first is held in fields, the others in a Map made
 * only when a second source shows up, so a request scope's stats cost one counters object.
 */
export class CounterSet implements Sink {
  #firstName: string | undefined = undefined;
  #first: Counters | undefined = undefined;
  #others: Map<string, Counters> | undefined = undefined;

  of(source: string): Counters {
    if (source === this.#firstName) return this.#first!;
    if (this.#firstName === undefined) {
      this.#firstName = source;
      return (this.#first = zeroCounters());
    }
    const others = (this.#others ??= new Map());
    let counters = others.get(source);
    if (counters === undefined) {
      counters = zeroCounters();
      others.set(source, counters);
    }
    return counters;
  }

  count(source: string, counter: CounterName, n: number): void {
    this.of(source)[counter] += n;
  }

  snapshot(): MetricsSnapshot {
    const total = zeroCounters();
    const sources: Record<string, Counters> = {};
    const add = (name: string, counters: Counters) => {
      setOwn(sources, name, { ...counters });
      addCounters(total, counters);
    };
    if (this.#firstName !== undefined) add(this.#firstName, this.#first!);
    if (this.#others !== undefined) for (const [name, counters] of this.#others) add(name, counters);
    return { total, sources };
  }
}

/**
 * A request's counts: only what happened is kept (a request sees a few events of one or two
 * sources; a stampede of 10,000 requests would otherwise hold 10,000 full counter objects).
 */
export class RequestCounters implements Sink {
  #firstName: string | undefined = undefined;
  #first: Partial<Counters> | undefined = undefined;
  #others: Map<string, Partial<Counters>> | undefined = undefined;

  count(source: string, counter: CounterName, n: number): void {
    const counts = source === this.#firstName ? this.#first! : this.#of(source);
    // A named property for the hit (most of a request's events): the keyed access costs a warm
    // @cached field about a tenth of its hit path.
    if (counter === 'hits') counts.hits = (counts.hits ?? 0) + n;
    else counts[counter] = (counts[counter] ?? 0) + n;
  }

  #of(source: string): Partial<Counters> {
    if (source === this.#firstName) return this.#first!;
    if (this.#firstName === undefined) {
      this.#firstName = source;
      return (this.#first = {});
    }
    const others = (this.#others ??= new Map());
    let counts = others.get(source);
    if (counts === undefined) others.set(source, (counts = {}));
    return counts;
  }

  /** One counter summed over the sources, without a snapshot. */
  total(counter: CounterName): number {
    let sum = this.#first?.[counter] ?? 0;
    if (this.#others !== undefined) for (const counts of this.#others.values()) sum += counts[counter] ?? 0;
    return sum;
  }

  snapshot(): MetricsSnapshot {
    const total = zeroCounters();
    const sources: Record<string, Counters> = {};
    const add = (name: string, counts: Partial<Counters>) => {
      const counters = { ...zeroCounters(), ...counts };
      setOwn(sources, name, counters);
      addCounters(total, counters);
    };
    if (this.#firstName !== undefined) add(this.#firstName, this.#first!);
    if (this.#others !== undefined) for (const [name, counts] of this.#others) add(name, counts);
    return { total, sources };
  }
}

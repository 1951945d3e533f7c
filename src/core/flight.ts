/**
 * The single-flight table: at most one fill per key in flight in this process.
 *
 * A flight is independent of the callers that wait on it. The first caller creates it, later
 * callers join it, and any of them may leave (abort) without disturbing the others. The fill
 * behind a flight is told to stop (its AbortSignal) only when nobody is left to want it.
 *
 * A flight ends in one of three ways:
 * - resolved: every waiter gets the value. The store write is issued in the same synchronous
 *   step, so a caller arriving later reads it (a store on one connection keeps command order);
 * - failed: every waiter gets the fill's own error object; nothing is written; the key is free;
 * - abandoned: invalidated, cleared, or left by every waiter. Its result is never written and
 *   its waiters re-contend (they receive RETRY and start over), so a stuck fill cannot hold
 *   them hostage once someone clears the key.
 */
import { HerdcacheError, describe } from './errors';

/** A fill's result for one key, when it is not a value. */
export class Failure {
  constructor(readonly error: unknown) {}
}

/** User errors pass through untouched; a thrown non-Error is wrapped so callers get a stack and a code. */
export function asError(thrown: unknown): unknown {
  if (thrown instanceof Error) return thrown;
  return new HerdcacheError('E_FILL_NON_ERROR', `herdcache: a fill threw a non-Error value: ${describe(thrown)}`, { cause: thrown });
}

/** Rejection reason that tells a waiter to re-contend instead of failing. Never leaks to users. */
export const RETRY: unique symbol = Symbol('herdcache.retry');

const PENDING = 0;
const RESOLVED = 1;
const FAILED = 2;
const ABANDONED = 3;

function ignore(): void {}

/**
 * One call of a fill or batch function, shared by the flights it computes. Its signal fires
 * when the last of them is abandoned: aborting earlier would cancel work others still want.
 */
export class FillRun {
  readonly controller = new AbortController();
  #live: number;

  constructor(flights: number) {
    this.#live = flights;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  release(reason: unknown): void {
    if (--this.#live === 0) this.controller.abort(reason);
  }
}

export class Flight<V = unknown> {
  readonly key: string;
  /** A background refresh: no caller owns it, so callers leaving never abandon it. */
  readonly background: boolean;
  readonly promise: Promise<V>;
  /** Callers currently waiting. */
  waiters = 0;
  /** The fill run computing this flight, once it started. */
  run: FillRun | undefined = undefined;
  /** Tags of the value being computed, for invalidateTags. */
  readonly tags: readonly string[] | undefined;
  #state = PENDING;
  #resolve!: (value: V) => void;
  #reject!: (reason: unknown) => void;

  constructor(key: string, background: boolean, tags: readonly string[] | undefined) {
    this.key = key;
    this.background = background;
    this.tags = tags;
    this.promise = new Promise<V>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // A flight may fail or be abandoned with nobody waiting (all aborted, background refresh):
    // that must not surface as an unhandled rejection.
    this.promise.catch(ignore);
  }

  get pending(): boolean {
    return this.#state === PENDING;
  }

  get abandoned(): boolean {
    return this.#state === ABANDONED;
  }

  /** @internal used by FlightTable */
  _resolve(value: V): boolean {
    if (this.#state !== PENDING) return false;
    this.#state = RESOLVED;
    this.#resolve(value);
    return true;
  }

  /** @internal used by FlightTable */
  _fail(error: unknown): boolean {
    if (this.#state !== PENDING) return false;
    this.#state = FAILED;
    this.#reject(error);
    return true;
  }

  /** @internal used by FlightTable */
  _abandon(reason: unknown): boolean {
    if (this.#state !== PENDING) return false;
    this.#state = ABANDONED;
    this.#reject(RETRY);
    this.run?.release(reason);
    return true;
  }
}

export class FlightTable {
  readonly #flights = new Map<string, Flight>();

  get size(): number {
    return this.#flights.size;
  }

  get(key: string): Flight | undefined {
    return this.#flights.get(key);
  }

  start(key: string, background: boolean, tags: readonly string[] | undefined): Flight {
    const flight = new Flight(key, background, tags);
    this.#flights.set(key, flight);
    return flight;
  }

  /** Hands the value to every waiter and frees the key. */
  resolve(flight: Flight, value: unknown): void {
    if (flight._resolve(value)) this.#remove(flight);
  }

  fail(flight: Flight, error: unknown): void {
    if (flight._fail(error)) this.#remove(flight);
  }

  abandon(flight: Flight, reason: unknown): void {
    if (flight._abandon(reason)) this.#remove(flight);
  }

  /** Abandons the flights computing a value that carries one of `tags`. */
  abandonTagged(tags: ReadonlySet<string>, reason: unknown): void {
    for (const flight of [...this.#flights.values()]) {
      if (flight.tags !== undefined && flight.tags.some((tag) => tags.has(tag))) this.abandon(flight, reason);
    }
  }

  /** Abandons every flight (cache.clear()): their waiters re-contend, their results are dropped. */
  abandonAll(reason: unknown): void {
    for (const flight of [...this.#flights.values()]) this.abandon(flight, reason);
  }

  #remove(flight: Flight): void {
    // Only remove our own entry: a newer flight may already own the key.
    if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key);
  }
}

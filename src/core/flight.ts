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
import type { Entry } from './freshness';
import type { Counted, Sink } from './metrics';

/** What a caller that joined a flight counts as: the flight's outcome ('coalesced': it ran a fill). */
export type JoinOutcome = 'hits' | 'staleServed' | 'coalesced';

/** A fill's result for one key, when it is not a value. */
export class Failure {
  constructor(readonly error: unknown) {}
}

/** User errors pass through untouched; a thrown non-Error is wrapped so callers get a stack and a code. */
export function asError(thrown: unknown): unknown {
  if (thrown instanceof Error) return thrown;
  return new HerdcacheError('E_FILL_NON_ERROR', `herdcache: a fill threw a non-Error value: ${describe(thrown)}`, {
    cause: thrown,
  });
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

/**
 * The one abort race of the library, used by flights and by request scopes alike: `promise`'s
 * outcome, unless `signal` fires first, which rejects this caller alone with the signal's reason
 * and tells the owner (`leave`) so it can stop the work when its last caller is gone. `retry`,
 * when given, re-contends on RETRY (the flight was abandoned: a new flight answers instead).
 * Per caller: one promise and the listener the signal needs, nothing more.
 *
 * It always settles: a signal that is already aborted rejects at once (an 'abort' event never
 * fires twice, so a listener added now would wait forever), and whichever side comes first
 * decides; the other is ignored.
 */
export function raceAbort<V>(
  promise: Promise<V>,
  signal: AbortSignal,
  leave: () => void,
  retry?: () => Promise<V>,
): Promise<V> {
  if (signal.aborted) {
    leave();
    return Promise.reject(signal.reason);
  }
  return new Promise<V>((resolve, reject) => {
    let left = false;
    const onAbort = () => {
      if (left) return;
      left = true;
      leave();
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (reason: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (left) return; // already rejected with the abort reason
        if (signal.aborted)
          onAbort(); // aborted, its event not dispatched yet (a dependent signal)
        else if (reason === RETRY && retry !== undefined) retry().then(resolve, reject);
        else reject(reason);
      },
    );
  });
}

/**
 * The value of a promise handed to callers, once known: a property of the promise itself, not a
 * WeakMap entry. A flight's shared promise is marked when the flight resolves, with no handler of
 * its own; a WeakMap entry per flight (100 per request of a 100-key list) cost the GC an ephemeron
 * each, and the handler a promise, two closures and a microtask.
 */
const VALUE: unique symbol = Symbol('herdcache.value');
type Marked = Promise<unknown> & { [VALUE]?: unknown };

function markValue(promise: Promise<unknown>, value: unknown): void {
  (promise as Marked)[VALUE] = value;
}

/** Rejections of promises handed to callers (rare: failed fills, refused calls). */
const rejections = new WeakMap<Promise<unknown>, unknown>();

/** Records how `promise` settles, by a handler (a promise whose outcome no flight decides). */
function recordOutcome(promise: Promise<unknown>): void {
  promise.then(
    (value) => {
      markValue(promise, value);
    },
    (reason: unknown) => {
      rejections.set(promise, reason);
    },
  );
}

/** A promise already rejected with `error`, recorded for outcomeOf (a failure before any flight). */
export function rejected<V>(error: unknown): Promise<V> {
  const promise = Promise.reject(error);
  rejections.set(promise, error);
  return promise;
}

/** An entry's value as a settled promise, made once per entry and reused by every later hit. */
export function fulfilled<V>(entry: Entry<V>): Promise<V> {
  let promise = entry.resolved as Promise<V> | undefined;
  if (promise === undefined) {
    promise = Promise.resolve(entry.value);
    entry.resolved = promise;
    markValue(promise, entry.value);
  }
  return promise;
}

/** What outcomeOf knows of a promise this module made. */
export const PENDING_OR_UNKNOWN: unique symbol = Symbol('herdcache.pending');

/**
 * How a promise handed to callers (a flight's shared promise, a hit's, rejected()'s) settled:
 * `{ error }` once it rejected, its value once it resolved, PENDING_OR_UNKNOWN before (or for a
 * promise made elsewhere). Lets a request scope answer a settled load synchronously and forget a
 * failed one when it next looks, instead of attaching a handler per caller (a stampede of 10k
 * requests would pay 10k of them).
 */
export function outcomeOf(promise: Promise<unknown>): unknown {
  if (VALUE in promise) return (promise as Marked)[VALUE];
  if (rejections.has(promise)) return new Rejection(rejections.get(promise));
  return PENDING_OR_UNKNOWN;
}

export class Rejection {
  constructor(readonly error: unknown) {}
}

export class Flight<V = unknown> {
  readonly key: string;
  /** A background refresh: no caller owns it, so callers leaving never abandon it. */
  readonly background: boolean;
  /** Settles with the fill; rejects with RETRY when abandoned. Never handed to users. */
  readonly promise: Promise<V>;
  /**
   * What every caller without a signal gets: the same promise for all of them, so joining costs a
   * counter increment and the flight's outcome reaches them in one pass. When the flight is
   * abandoned it re-contends once, for all of them (`retry` of the first), instead of each
   * caller re-contending in turn: they would all join the first one's new flight anyway.
   */
  #joined: Promise<V> | undefined = undefined;
  /** Callers currently waiting. */
  waiters = 0;
  /** The fill run computing this flight, once it started. */
  run: FillRun | undefined = undefined;
  /** Tags of the value being computed, for invalidateTags. */
  readonly tags: readonly string[] | undefined;
  /** Its tags are known only when it ends (LateTagged): any tag invalidation abandons it. */
  lateTags = false;
  /**
   * A background refresh: the entry it replaces, while a caller may still be answered with it
   * (fresh under early refresh, or stale within grace). Callers arriving during the refresh get
   * that value at once instead of waiting for the refresh: stale-while-revalidate means nobody waits.
   */
  replacing: Entry | undefined = undefined;
  /**
   * How a caller joining now is counted, once the store read told what this flight does; until
   * then joiners are only noted (below) and counted in one pass when it is known (LoadPath).
   */
  joinedAs: JoinOutcome | undefined = undefined;
  /**
   * The first noted joiner's source, and how many of its joiners were noted (without a sink, or
   * with one that counts itself from the flight: Sink.joined).
   */
  joinSource: Counted | undefined = undefined;
  joins = 0;
  /** The other noted joiners (a request scope's, or another source's), flat: source, sink, … */
  joiners: (Counted | Sink | undefined)[] | undefined = undefined;
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

  /**
   * Joins without a signal: the flight's shared promise, or undefined when no caller has shared it
   * yet (the caller then calls share(), so its retry function is made once per flight, not per call).
   */
  join(): Promise<V> | undefined {
    const joined = this.#joined;
    if (joined !== undefined) this.waiters++;
    return joined;
  }

  /** The first join without a signal: makes the shared promise, re-contending with `retry` on RETRY. */
  share(retry: () => Promise<V>): Promise<V> {
    this.waiters++;
    if (this.#joined !== undefined) return this.#joined;
    // Its outcome is recorded when the flight ends (see _resolve): no handler of its own.
    this.#joined = this.promise.then(undefined, (reason: unknown) =>
      reason === RETRY ? retry() : Promise.reject(reason),
    );
    return this.#joined;
  }

  /** Joins with a signal: this caller may leave; the last one out abandons a caller-owned flight. */
  joinWithSignal(signal: AbortSignal, abandon: (flight: Flight<V>) => void, retry: () => Promise<V>): Promise<V> {
    this.waiters++;
    return raceAbort(
      this.promise,
      signal,
      () => {
        if (--this.waiters === 0 && this.#state === PENDING && !this.background) abandon(this);
      },
      retry,
    );
  }

  get abandoned(): boolean {
    return this.#state === ABANDONED;
  }

  /** @internal used by FlightTable */
  _resolve(value: V): boolean {
    if (this.#state !== PENDING) return false;
    this.#state = RESOLVED;
    this.#resolve(value);
    // Known now, a turn before the shared promise settles with it: a scope reading it meanwhile
    // gets the value itself (as it would a moment later), never a different one.
    if (this.#joined !== undefined) markValue(this.#joined, value);
    return true;
  }

  /** @internal used by FlightTable */
  _fail(error: unknown): boolean {
    if (this.#state !== PENDING) return false;
    this.#state = FAILED;
    this.#reject(error);
    // Recorded as it reaches the shared promise, before any of its callers' handlers run.
    if (this.#joined !== undefined) recordOutcome(this.#joined);
    return true;
  }

  /** @internal used by FlightTable */
  _abandon(reason: unknown): boolean {
    if (this.#state !== PENDING) return false;
    this.#state = ABANDONED;
    this.#reject(RETRY);
    // Its callers re-contend (share's retry): the shared promise ends as the new flight does.
    if (this.#joined !== undefined) recordOutcome(this.#joined);
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
      if (flight.lateTags || (flight.tags !== undefined && flight.tags.some((tag) => tags.has(tag))))
        this.abandon(flight, reason);
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

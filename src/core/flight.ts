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
 *   them hostage once someone clears the key. Re-contending is bounded: a flight its callers
 *   reached through PATIENT_AFTER abandonments is, when invalidated once its fill runs, detached
 *   instead (off the table: later callers start anew; its result still not written) and its
 *   callers get its fill's result. A key invalidated faster than it fills (a write stream), or a
 *   fill that invalidates its own key, then costs each caller PATIENT_AFTER + 1 fills at most.
 */
import { HerdcacheError, describe, isError } from './errors';
import type { Entry } from './freshness';
import type { Counted, Sink } from './metrics';
import type { FillRun } from './fill-run';
import { RETRY, raceAbort } from './abort-race';
import { markOwn, markRejected, markValue, recordOutcome, rejected, rejections } from './outcome';
import { type Reading, endRead } from './read-window';

export { PENDING_OR_UNKNOWN, Rejection, fulfilled, outcomeOf, rejected } from './outcome';

/** What a caller that joined a flight counts as: the flight's outcome ('coalesced': it ran a fill). */
export type JoinOutcome = 'hits' | 'staleServed' | 'coalesced';

/** A fill's result for one key, when it is not a value. */
export class Failure {
  constructor(readonly error: unknown) {}
}

/** User errors pass through untouched; a thrown non-Error is wrapped so callers get a stack and a code. */
export function asError(thrown: unknown): unknown {
  if (isError(thrown)) return thrown;
  return new HerdcacheError('E_FILL_NON_ERROR', `herdcache: a fill threw a non-Error value: ${describe(thrown)}`, {
    cause: thrown,
  });
}

const PENDING = 0;
const RESOLVED = 1;
const FAILED = 2;
const ABANDONED = 3;
const DETACHED = 4; // abandoned for the table and the store, its callers still waiting for its run (the header)

/** Abandonments a caller re-contends through; invalidated again, its flight is detached (see the header). */
export const PATIENT_AFTER = 2;

function ignore(): void {}

/** Flights started in this process so far (Flight.seq). */
let started = 0;

/** How many flights this process has started: a flight whose seq is at most this started before now. */
export function flightsStarted(): number {
  return started;
}

/**
 * The resolving functions of the promise being made, taken by one executor (capture) shared by
 * every flight, so a flight's promise costs no closure of its own. Cleared once read: kept, they
 * held the last promise made alive, and with it its value (one value past its invalidation).
 */
let madeResolve: ((value: unknown) => void) | undefined;
let madeReject: ((reason: unknown) => void) | undefined;

function capture<T>(resolve: (value: T) => void, reject: (reason: unknown) => void): void {
  madeResolve = resolve as (value: unknown) => void;
  madeReject = reject;
}

export class Flight<V = unknown> {
  readonly key: string;
  /** A background refresh: started for no caller (the callers that join it later may leave it: joinWithSignal). */
  readonly background: boolean;
  /**
   * Settles with the fill; rejects with RETRY when abandoned (made on first use: callers with a
   * signal, a refresh's bookkeeping). Never handed to users.
   */
  #promise: Promise<V> | undefined = undefined;
  #resolve: ((value: V) => void) | undefined = undefined;
  #reject: ((reason: unknown) => void) | undefined = undefined;
  /**
   * What every caller without a signal gets (but own()'s): one promise for all, settled by the
   * flight itself (not chained on `promise`: two more promises and microtasks per key). Abandoned,
   * it re-contends once for all of them (`#retry`, the first one's): they would join one flight.
   */
  #joined: Promise<V> | undefined = undefined;
  #resolveJoined: ((value: V | Promise<V>) => void) | undefined = undefined;
  #rejectJoined: ((reason: unknown) => void) | undefined = undefined;
  /**
   * The starter's own promise (own()): a scoped loader's first load of the key hands it to its
   * caller, as DataLoader does, so no promise is chained per caller. Settled with the shared one.
   */
  #own: Promise<V> | undefined = undefined;
  #resolveOwn: ((value: V | Promise<V>) => void) | undefined = undefined;
  #rejectOwn: ((reason: unknown) => void) | undefined = undefined;
  #retry: ((context: unknown) => Promise<V>) | undefined = undefined;
  /** What `#retry` is called with: the Item of the load that started the flight, so no closure per key. */
  #retryContext: unknown = undefined;
  /**
   * The call of the latest caller that joined without a signal (its source, its fill's argument,
   * its policy; unset: none joined): after an abandonment the joiners re-contend with it, not
   * with the starter's fill, which may be what got stuck (see LoadPath's retry).
   */
  joinerSource: unknown = undefined;
  joinerArg: unknown = undefined;
  joinerPolicy: unknown = undefined;
  /** Notes the call of a caller joining without a signal (see joinerSource). */
  joinedBy(source: unknown, arg: unknown, policy: unknown): void {
    this.joinerSource = source;
    this.joinerArg = arg;
    this.joinerPolicy = policy;
  }

  /** Callers currently waiting. */
  waiters = 0;
  /** Abandonments its callers re-contended through to reach it (the most of any of them). */
  restarts = 0;
  /** The fill run computing this flight, once it started. */
  run: FillRun | undefined = undefined;
  /** Tags of the value being computed, for invalidateTags (a joiner's own added: FlightTable.joinTags). */
  tags: readonly string[] | undefined;
  /** Tags a joiner named that the starter did not: its value is then served, not written (FlightTable.joinTags). */
  joinedTags: string[] | undefined = undefined;
  /** Its tags are known only when it ends (LateTagged): see FlightTable.abandonTagged. */
  lateTags = false;
  /** Late-tagged: tags invalidated while its fill ran (true: too many); its tags once known (true: any counts). */
  lateNoted: Set<string> | true | undefined = undefined;
  lateKnown: readonly string[] | true | undefined = undefined;
  /**
   * A background refresh: the entry it replaces, while a caller may still be answered with it
   * (fresh under early refresh, or stale within grace). Callers arriving during the refresh get
   * that value at once instead of waiting for the refresh: stale-while-revalidate means nobody waits.
   */
  replacing: Entry | undefined = undefined;
  /** How a caller joining now is counted, once its store read told (till then: noted below, counted at once). */
  joinedAs: JoinOutcome | undefined = undefined;
  /**
   * The first noted joiner's source, and how many of its joiners were noted (without a sink, or
   * with one that counts itself from the flight: Sink.joined).
   */
  joinSource: Counted | undefined = undefined;
  joins = 0;
  /** The other noted joiners (a request scope's, or another source's), flat: source, sink, … */
  joiners: (Counted | Sink | undefined)[] | undefined = undefined;
  /** A store read of it under way, sent before a caller arriving now (./read-window). */
  reading: Reading | undefined = undefined;
  /** A caller joined since its last store read (of its tags' versions, when tagged) was sent: see ./read-window. */
  joinedSinceRead = false;
  #state = PENDING;
  /** The value or error it ended with (for a `promise` made after it ended). */
  #outcome: unknown = undefined;

  /** Its place among the flights this process started (flightsStarted): which started before what. */
  readonly seq = ++started;

  constructor(key: string, background: boolean, tags: readonly string[] | undefined) {
    this.key = key;
    this.background = background;
    this.tags = tags;
  }

  /** Settles with the fill; rejects with RETRY when abandoned. Never handed to users. */
  get promise(): Promise<V> {
    let promise = this.#promise;
    if (promise !== undefined) return promise;
    const state = this.#state;
    if (state === PENDING) {
      promise = new Promise<V>(capture);
      this.#resolve = madeResolve;
      this.#reject = madeReject;
      madeResolve = madeReject = undefined;
    } else if (state === RESOLVED) promise = Promise.resolve(this.#outcome as V);
    else promise = Promise.reject(state === FAILED ? this.#outcome : RETRY);
    // A flight may fail or be abandoned with nobody waiting (all aborted, background refresh):
    // that must not surface as an unhandled rejection.
    promise.catch(ignore);
    this.#promise = promise;
    return promise;
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

  /** The first join without a signal: makes the shared promise, re-contending with `retry(context)` on RETRY. */
  share<C>(retry: (context: C) => Promise<V>, context: C): Promise<V> {
    this.waiters++;
    if (this.#joined !== undefined) return this.#joined;
    // A flight is shared while it is in its table, i.e. pending; one that ended answers as it ended.
    const state = this.#state;
    let joined: Promise<V>;
    if (state === PENDING) {
      joined = new Promise<V>(capture);
      this.#resolveJoined = madeResolve;
      this.#rejectJoined = madeReject;
      madeResolve = madeReject = undefined;
      this.#retryWith(retry, context);
    } else if (state === RESOLVED) {
      joined = Promise.resolve(this.#outcome as V);
      markValue(joined, this.#outcome);
    } else if (state === FAILED) joined = rejected(this.#outcome);
    else joined = Promise.resolve().then(() => retry(context));
    this.#joined = joined;
    return joined;
  }

  /**
   * The starter's promise for its caller alone (marked: ownPending tells it from a shared one),
   * re-contending with `retry(context)` on RETRY. A flight that ended or has one already shares.
   */
  own<C>(retry: (context: C) => Promise<V>, context: C): Promise<V> {
    if (this.#state !== PENDING || this.#own !== undefined) return this.share(retry, context);
    this.waiters++;
    const own = new Promise<V>(capture);
    this.#resolveOwn = madeResolve;
    this.#rejectOwn = madeReject;
    madeResolve = madeReject = undefined;
    markOwn(own);
    this.#own = own;
    this.#retryWith(retry, context);
    return own;
  }

  /** The first caller's retry re-contends for all of them. */
  #retryWith<C>(retry: (context: C) => Promise<V>, context: C): void {
    if (this.#retry !== undefined) return;
    this.#retry = retry as (context: unknown) => Promise<V>;
    this.#retryContext = context;
  }

  /** Joins with a signal: the last caller out abandons the flight (a refresh too, once its stale value is past serving). */
  joinWithSignal(signal: AbortSignal, abandon: (flight: Flight<V>) => void, retry: () => Promise<V>): Promise<V> {
    this.waiters++;
    return raceAbort(
      this.promise,
      signal,
      () => {
        if (--this.waiters === 0 && (this.#state === PENDING || this.#state === DETACHED)) abandon(this);
      },
      retry,
    );
  }

  /** Abandoned, or detached: its result is not written. */
  get abandoned(): boolean {
    return this.#state === ABANDONED || this.#state === DETACHED;
  }

  /** Abandoned by an invalidation with its callers still waiting for its run (see the header). */
  get detached(): boolean {
    return this.#state === DETACHED;
  }

  /** Resolved, failed or abandoned. */
  get ended(): boolean {
    return this.#state !== PENDING;
  }

  /** @internal used by FlightTable */
  _resolve(value: V): boolean {
    if (this.#state !== PENDING && this.#state !== DETACHED) return false;
    this.#state = RESOLVED;
    this.#outcome = value;
    this.#resolve?.(value);
    const own = this.#own;
    if (own !== undefined) {
      markValue(own, value);
      this.#resolveOwn!(value);
    }
    const joined = this.#joined;
    if (joined !== undefined) {
      // Known now, as its callers' reactions are queued: a scope reading it meanwhile gets the
      // value itself (as it would a moment later), never a different one.
      markValue(joined, value);
      this.#resolveJoined!(value);
    }
    this.#release();
    return true;
  }

  /** @internal used by FlightTable */
  _fail(error: unknown): boolean {
    if (this.#state !== PENDING && this.#state !== DETACHED) return false;
    this.#state = FAILED;
    this.#outcome = error;
    this.#reject?.(error);
    const own = this.#own;
    if (own !== undefined) {
      markRejected(own, error);
      this.#rejectOwn!(error);
    }
    const joined = this.#joined;
    if (joined !== undefined) {
      // Recorded before any of its callers' handlers run.
      rejections.set(joined, error);
      this.#rejectJoined!(error);
    }
    this.#release();
    return true;
  }

  /**
   * @internal used by FlightTable. `patient`: an invalidation, which detaches a flight reached
   * through PATIENT_AFTER abandonments once its fill runs (see the header). True when the table
   * is to let go of it.
   */
  _abandon(reason: unknown, patient = false): boolean {
    const state = this.#state;
    // Detached: an invalidation leaves it be; anything else (its last caller left, the cache
    // closed) abandons it as a pending flight is: its fill's signal fires, its callers re-contend.
    if (state === DETACHED && patient) return false;
    if (state !== PENDING && state !== DETACHED) return false;
    if (
      patient &&
      this.restarts >= PATIENT_AFTER &&
      this.run !== undefined &&
      this.waiters > 0 &&
      !this.lateTags &&
      !this.background
    ) {
      this.#state = DETACHED; // its fill runs: no read of it is under way
      return true;
    }
    this.#state = ABANDONED;
    this.#reject?.(RETRY);
    const joined = this.#joined;
    const own = this.#own;
    if (joined !== undefined || own !== undefined) {
      // Its callers re-contend, once the table has let go of this flight (a microtask later, as a
      // reaction would): the shared and own promises end as the new flight does.
      const retry = this.#retry!;
      const context = this.#retryContext;
      const resolveJoined = this.#resolveJoined;
      const resolveOwn = this.#resolveOwn;
      queueMicrotask(() => {
        let next: Promise<V>;
        try {
          next = retry(context); // it may read the joiner's call (kept until now: see below)
        } catch (error) {
          next = Promise.reject(error);
        }
        this.#dropJoiner();
        if (own !== undefined) {
          // Recorded from `next` (before own settles), not by a handler on own: its caller's own.
          next.then(
            (value) => markValue(own, value),
            (error: unknown) => markRejected(own, error),
          );
          resolveOwn!(next);
        }
        resolveJoined?.(next);
      });
      if (joined !== undefined) recordOutcome(joined);
      this.run?.release(reason);
      this.#releaseCallers(); // the joiner's call stays until the retry read it
      return true;
    }
    this.run?.release(reason);
    this.#release();
    return true;
  }

  /** An ended flight drops what only its callers needed: small, whatever still holds it (see FlightTable.#remove). */
  #release(): void {
    this.#dropJoiner();
    this.#releaseCallers();
  }

  #dropJoiner(): void {
    this.joinerSource = this.joinerArg = this.joinerPolicy = undefined;
  }

  #releaseCallers(): void {
    endRead(this); // its read's waiting callers load: it ended
    this.#resolve = undefined;
    this.#reject = undefined;
    this.#resolveJoined = undefined;
    this.#rejectJoined = undefined;
    this.#resolveOwn = undefined;
    this.#rejectOwn = undefined;
    this.#retry = undefined;
    this.#retryContext = undefined;
    this.run = undefined;
    this.replacing = undefined;
  }
}

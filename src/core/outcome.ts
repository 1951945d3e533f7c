/**
 * How a promise handed to callers settled, known without a handler per caller: a flight's shared
 * promise, a hit's settled promise, a refused load's rejection. A request scope reads it to answer
 * a settled load synchronously and to forget a failed one (see outcomeOf).
 */
import type { Entry } from './freshness';

/**
 * The value of a promise handed to callers, once known: a property of the promise itself, not a
 * WeakMap entry. A flight's shared promise is marked when the flight resolves, with no handler of
 * its own; a WeakMap entry per flight (100 per request of a 100-key list) cost the GC an ephemeron
 * each, and the handler a promise, two closures and a microtask.
 */
const VALUE: unique symbol = Symbol('herdcache.value');
type Marked = Promise<unknown> & { [VALUE]?: unknown };

export function markValue(promise: Promise<unknown>, value: unknown): void {
  (promise as Marked)[VALUE] = value;
}

/**
 * A promise its flight settles for one caller alone (a scoped loader's first load of a key: see
 * Flight.own): marked pending when made, so the caller can tell it from a shared one (ownPending),
 * and marked with its outcome, as a shared promise is, before its reactions run.
 */
export function markOwn(promise: Promise<unknown>): void {
  (promise as Marked)[VALUE] = PENDING_OR_UNKNOWN;
}

/** Whether `promise` is an own promise (markOwn) still pending: nobody else holds it. */
export function ownPending(promise: Promise<unknown>): boolean {
  return (promise as Marked)[VALUE] === PENDING_OR_UNKNOWN;
}

/** An own promise's rejection, recorded before its reactions run. */
export function markRejected(promise: Promise<unknown>, error: unknown): void {
  (promise as Marked)[VALUE] = new Rejection(error);
}

/** Rejections of promises handed to callers (rare: failed fills, refused calls). */
export const rejections = new WeakMap<Promise<unknown>, unknown>();

/** Records how `promise` settles, by a handler (a promise whose outcome no flight decides). */
export function recordOutcome(promise: Promise<unknown>): void {
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

/** What outcomeOf knows of a promise this module made (and the mark of an own promise still pending). */
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

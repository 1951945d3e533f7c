/**
 * How a caller waits on a promise it may leave: its own signal races the promise, and a flight
 * abandoned under it (RETRY) makes it re-contend. Used by flights and by request scopes.
 */
/** Rejection reason that tells a waiter to re-contend instead of failing. Never leaks to users. */
export const RETRY: unique symbol = Symbol('herdcache.retry');

/**
 * The one abort race of the library, used by flights and by request scopes alike: `promise`'s
 * outcome, unless `signal` fires first, which rejects this caller alone with the signal's reason
 * and tells the owner (`leave`) so it can stop the work when its last caller is gone. `retry`,
 * when given, re-contends on RETRY (the flight was abandoned: a new flight answers instead).
 * Per caller: one promise and one entry in its signal's set of waiters (see waitersOf), nothing more.
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
    const waiters = waitersOf(signal);
    waiters.add(onAbort);
    promise.then(
      (value) => {
        waiters.delete(onAbort);
        resolve(value);
      },
      (reason: unknown) => {
        waiters.delete(onAbort);
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
 * The callers racing one signal, woken by the one 'abort' listener the signal gets for them all.
 * A listener per caller would behave the same, but a request's signal is shared by all its loads:
 * past 10 listeners Node warns of a leak (MaxListenersExceededWarning) on every request with more
 * than 10 loads pending at once, and EventTarget's add and remove cost more than a Set's. The
 * listener leaves with the signal's last caller, so a long-lived signal keeps none between loads.
 */
class SignalWaiters {
  readonly #signal: AbortSignal;
  readonly #waiters = new Set<() => void>();
  readonly #onAbort = () => {
    signalWaiters.delete(this.#signal);
    // Callers that arrive now see signal.aborted and reject at once: nobody is added meanwhile.
    for (const onAbort of this.#waiters) {
      try {
        onAbort();
      } catch (error) {
        // Reported as EventTarget reports a listener's throw (uncaught, later), the rest still woken.
        process.nextTick(() => {
          throw error;
        });
      }
    }
    this.#waiters.clear();
  };

  constructor(signal: AbortSignal) {
    this.#signal = signal;
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  add(onAbort: () => void): void {
    this.#waiters.add(onAbort);
  }

  delete(onAbort: () => void): void {
    const waiters = this.#waiters;
    if (!waiters.delete(onAbort) || waiters.size > 0 || signalWaiters.get(this.#signal) !== this) return;
    signalWaiters.delete(this.#signal);
    this.#signal.removeEventListener('abort', this.#onAbort);
  }
}

const signalWaiters = new WeakMap<AbortSignal, SignalWaiters>();

function waitersOf(signal: AbortSignal): SignalWaiters {
  let waiters = signalWaiters.get(signal);
  if (waiters === undefined) signalWaiters.set(signal, (waiters = new SignalWaiters(signal)));
  return waiters;
}

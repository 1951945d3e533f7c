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

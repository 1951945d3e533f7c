/**
 * The timeout of one call a networked store has sent (CallGuard admits it first: guard.ts): it
 * rejects with E_STORE_TIMEOUT when the answer takes longer than the command timeout, plus 1 ms per
 * 4 KiB for a call that sends a large payload (a write of an 8 MB value on a busy machine takes
 * longer than 250 ms to move, and would be refused on every fill), plus more while its reply keeps
 * arriving (see boundCall). The verdict is deferred past the event loop's poll phase
 * (setImmediate): when the loop was blocked longer than the timeout, the timer and the reply are
 * both due, and timers run first; the reply, already in the socket, wins. Every outcome feeds the
 * breaker.
 */
import { HerdcacheError } from '../core/errors';
import type { CircuitBreaker } from './breaker';
import { warnIfDenied } from './permissions';

/** Bytes a write may move per millisecond of its budget beyond the command timeout. */
export const BYTES_PER_MS = 4096;

/** setTimeout's ceiling; a longer timeout would fire at once. */
export const MAX_TIMEOUT = 2 ** 31 - 1;

/** The budget of a call sending `bytes`: the command timeout + 1 ms per 4 KiB. */
export function writeTimeout(commandTimeout: number, bytes: number | undefined): number {
  if (bytes === undefined || bytes < BYTES_PER_MS) return commandTimeout;
  return Math.min(MAX_TIMEOUT, commandTimeout + Math.ceil(bytes / BYTES_PER_MS));
}

/** Errors from the client get a code; the original stays reachable as `cause`. */
export function storeError(name: string, op: string, error: unknown): HerdcacheError {
  if (error instanceof HerdcacheError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new HerdcacheError('E_STORE_ERROR', `herdcache: ${name} ${op} failed: ${message}`, { cause: error });
}

/** What bounds one call: the guard's settings and the connection it went out on. */
export interface CallBounds {
  /** The store's name, for messages ("redis"). */
  readonly name: string;
  /** The command timeout, and the slice a reply still arriving is given each time. */
  readonly timeout: number;
  /** The longest a call is waited for while its reply keeps arriving. */
  readonly arrivingTimeout: number;
  /** A standalone client's socket (its bytesRead tells a reply is arriving); none on a Cluster. */
  readonly socket: unknown;
  /** Called after the rejection with the error of a call the client rejected (not a timeout). */
  readonly onReplyError: (error: unknown) => void;
}

/**
 * Settles with `pending` or rejects with E_STORE_TIMEOUT, whichever comes first, and feeds the
 * breaker. A late answer is still observed (so a late rejection never becomes an unhandled one)
 * and is handed to `onLate` if given: the call already failed as far as anyone is concerned.
 *
 * A reply still arriving is waited for: a read cannot know its size before it is answered (an
 * MGET of an 8 MiB value takes longer than 250 ms to move on a busy machine). When the timeout
 * is due and the connection received bytes since the call was sent (or since the last such
 * check), the call gets another `timeout`, up to `arrivingTimeout` in all: replies come in order
 * on a connection, so bytes arriving are progress toward this one, while a stalled or paused
 * Redis sends nothing and still fails the call at `timeout`. A Cluster has no single connection:
 * its calls keep the plain timeout.
 */
export function boundCall<T>(
  bounds: CallBounds,
  op: string,
  pending: Promise<T>,
  breaker: CircuitBreaker | undefined,
  onLate: ((value: unknown, group: number) => void) | undefined,
  bytes: number | undefined,
): Promise<T> {
  const timeout = writeTimeout(bounds.timeout, bytes);
  const name = bounds.name;
  const socket = bounds.socket as { readonly bytesRead?: unknown } | undefined;
  let received = typeof socket?.bytesRead === 'number' ? socket.bytesRead : undefined;
  let waited = timeout;
  const longest = Math.max(timeout, bounds.arrivingTimeout);
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timedOut = false;
    let timer: NodeJS.Timeout;
    const verdict = (): void => {
      if (settled) return;
      if (received !== undefined && waited < longest) {
        const now = socket!.bytesRead as number;
        if (now > received) {
          received = now;
          const more = Math.min(bounds.timeout, longest - waited);
          waited += more;
          arm(more);
          return;
        }
      }
      settled = true;
      timedOut = true;
      breaker?.failure();
      reject(new HerdcacheError('E_STORE_TIMEOUT', `herdcache: ${name} ${op} timed out after ${waited} ms`));
    };
    const arm = (ms: number): void => {
      // setImmediate runs after the poll phase that reads a reply already waiting in the socket.
      timer = setTimeout(() => setImmediate(verdict), ms);
      // The pending command keeps its socket alive anyway; the timer alone must not hold a process.
      timer.unref();
    };
    arm(timeout);
    pending.then(
      (value) => {
        if (settled) {
          if (!timedOut) return;
          // Redis answers again (a stall is over): the cool-down ends, the next call is the trial.
          breaker?.answered();
          if (onLate !== undefined) onLate(value, 0);
          return;
        }
        settled = true;
        clearTimeout(timer);
        breaker?.success();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        breaker?.failure();
        warnIfDenied(op, error);
        reject(storeError(name, op, error));
        bounds.onReplyError(error);
      },
    );
  });
}

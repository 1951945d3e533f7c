/**
 * Bounds every call a networked store makes: the store must never be the outage.
 *
 * Before sending:
 * - a client that has never been ready (just created, still connecting: a deploy's first
 *   requests) is waited for, until its first `ready`, at most `readyTimeout` ms counted from the
 *   first call that had to wait. Failing those calls fast would run every replica's first burst
 *   without the fill lock and open the breaker for nothing. Past the budget, calls fail fast.
 * - a client that was ready and lost its connection fails the call at once (ioredis would
 *   otherwise queue the command offline and answer whenever it reconnects), and so does an open
 *   circuit breaker.
 * After sending: the call rejects with E_STORE_TIMEOUT when the answer takes longer than the
 * timeout. The verdict is deferred past the event loop's poll phase (setImmediate): when the
 * loop was blocked longer than the timeout, the timer and the reply are both due, and timers run
 * first; the reply, already in the socket, wins. Every outcome of an admitted call feeds the breaker.
 */
import { HerdcacheError } from '../core/errors';
import type { BreakerState, CircuitBreaker } from './breaker';

/** The part of an ioredis client the guard looks at. */
export interface Connection {
  readonly status: string;
  connect(): Promise<unknown>;
  once(event: 'ready', listener: () => void): unknown;
  off(event: 'ready', listener: () => void): unknown;
}

export interface CallOptions {
  /**
   * Never refused by the breaker, nor counted by it: a lock release (compare-and-delete) of a lock
   * we may hold. Refusing it would leave the lock to expire by itself while every replica waits on it.
   */
  readonly releases?: boolean;
  /**
   * Called with the answer of a call that already timed out, when it finally arrives (a lock
   * acquire whose script ran after we gave up: its locks must be released).
   */
  readonly onLate?: (value: unknown) => void;
}

const noop = (): void => {};

export class CallGuard {
  readonly #connection: Connection;
  readonly #timeout: number;
  readonly #readyTimeout: number;
  readonly #breaker: CircuitBreaker | undefined;
  readonly #name: string;
  /** Whether the client has ever been ready: only then is "not ready" an outage. */
  #wasReady: boolean;
  /** Until when calls wait for the first `ready` (set by the first call that waits). */
  #readyDeadline = 0;
  #firstReady: Promise<boolean> | undefined;

  constructor(name: string, connection: Connection, timeout: number, readyTimeout: number, breaker: CircuitBreaker | undefined) {
    this.#name = name;
    this.#connection = connection;
    this.#timeout = timeout;
    this.#readyTimeout = readyTimeout;
    this.#breaker = breaker;
    this.#wasReady = connection.status === 'ready';
    if (!this.#wasReady) {
      const onReady = (): void => {
        this.#wasReady = true;
      };
      connection.once('ready', onReady);
    }
  }

  get breakerState(): BreakerState | 'disabled' {
    return this.#breaker ? this.#breaker.state : 'disabled';
  }

  /**
   * Sends `send()` once admitted, bounded by the command timeout. On a client not yet ready for
   * the first time, waits for it first (see the file comment); the command is not handed to
   * ioredis before, so nothing queues offline.
   */
  run<T>(op: string, send: () => Promise<T>, options?: CallOptions): Promise<T> {
    const status = this.#connection.status;
    // 'end': the client gave up (or was closed) before it ever connected: nothing to wait for.
    if (status !== 'ready' && !this.#wasReady && status !== 'end' && this.#readyTimeout > 0) {
      return this.#afterFirstReady(op, send, options);
    }
    try {
      this.#admit(op, options?.releases === true);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#bound(op, send(), options);
  }

  async #afterFirstReady<T>(op: string, send: () => Promise<T>, options: CallOptions | undefined): Promise<T> {
    const connection = this.#connection;
    if (this.#readyDeadline === 0) this.#readyDeadline = Date.now() + this.#readyTimeout;
    const left = this.#readyDeadline - Date.now();
    if (left > 0) {
      // A lazyConnect client is started as ioredis would on its first command.
      if (connection.status === 'wait') connection.connect().catch(noop);
      this.#firstReady ??= new Promise<boolean>((resolve) => {
        const onReady = (): void => {
          clearTimeout(timer);
          resolve(true);
        };
        const timer = setTimeout(() => {
          connection.off('ready', onReady);
          resolve(false);
        }, left);
        timer.unref();
        connection.once('ready', onReady);
      });
      await this.#firstReady;
    }
    // Ready now, or the budget is spent: from here on, the usual rules (fail fast if not ready).
    this.#admit(op, options?.releases === true);
    return this.#bound(op, send(), options);
  }

  /** Throws instead of letting `op` send when the breaker is open or the client is not connected. */
  #admit(op: string, releases: boolean): void {
    const breaker = releases ? undefined : this.#breaker;
    if (breaker !== undefined && !breaker.admit()) {
      throw new HerdcacheError('E_CIRCUIT_OPEN', `herdcache: ${this.#name} ${op} not sent: circuit breaker open after repeated failures`);
    }
    const status = this.#connection.status;
    if (status !== 'ready') {
      if (status === 'wait') this.#connection.connect().catch(noop);
      breaker?.failure();
      throw new HerdcacheError('E_STORE_UNAVAILABLE', `herdcache: ${this.#name} ${op} not sent: client status is "${status}"`);
    }
  }

  /**
   * Settles with `pending` or rejects with E_STORE_TIMEOUT, whichever comes first, and feeds the
   * breaker. A late answer is still observed (so a late rejection never becomes an unhandled one)
   * and is handed to `onLate` if given: the call already failed as far as anyone is concerned.
   */
  #bound<T>(op: string, pending: Promise<T>, options: CallOptions | undefined): Promise<T> {
    const breaker = options?.releases === true ? undefined : this.#breaker;
    const onLate = options?.onLate;
    const timeout = this.#timeout;
    const name = this.#name;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      let timedOut = false;
      const verdict = (): void => {
        if (settled) return;
        settled = true;
        timedOut = true;
        breaker?.failure();
        reject(new HerdcacheError('E_STORE_TIMEOUT', `herdcache: ${name} ${op} timed out after ${timeout} ms`));
      };
      // setImmediate runs after the poll phase that reads a reply already waiting in the socket.
      const timer = setTimeout(() => setImmediate(verdict), timeout);
      // The pending command keeps its socket alive anyway; the timer alone must not hold a process.
      timer.unref();
      pending.then(
        (value) => {
          if (settled) {
            if (timedOut && onLate !== undefined) onLate(value);
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
          reject(storeError(name, op, error));
        },
      );
    });
  }
}

/** Errors from the client get a code; the original stays reachable as `cause`. */
export function storeError(name: string, op: string, error: unknown): HerdcacheError {
  if (error instanceof HerdcacheError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new HerdcacheError('E_STORE_ERROR', `herdcache: ${name} ${op} failed: ${message}`, { cause: error });
}

/**
 * Bounds every call a networked store makes: the store must never be the outage.
 *
 * Before sending: an open circuit breaker or a client that is not connected fails the call at
 * once (ioredis would otherwise queue the command offline and answer whenever it reconnects).
 * After sending: the call rejects with E_STORE_TIMEOUT when the answer takes longer than the
 * timeout. Every outcome feeds the breaker.
 */
import { HerdcacheError } from '../core/errors';
import type { BreakerState, CircuitBreaker } from './breaker';

/** The part of an ioredis client the guard looks at. */
export interface Connection {
  readonly status: string;
  connect(): Promise<unknown>;
}

const noop = (): void => {};

export class CallGuard {
  readonly #connection: Connection;
  readonly #timeout: number;
  readonly #breaker: CircuitBreaker | undefined;
  readonly #name: string;

  constructor(name: string, connection: Connection, timeout: number, breaker: CircuitBreaker | undefined) {
    this.#name = name;
    this.#connection = connection;
    this.#timeout = timeout;
    this.#breaker = breaker;
  }

  get breakerState(): BreakerState | 'disabled' {
    return this.#breaker ? this.#breaker.state : 'disabled';
  }

  /** Throws instead of letting `op` send when the breaker is open or the client is not connected. */
  admit(op: string): void {
    const breaker = this.#breaker;
    if (breaker !== undefined && !breaker.admit()) {
      throw new HerdcacheError('E_CIRCUIT_OPEN', `herdcache: ${this.#name} ${op} not sent: circuit breaker open after repeated failures`);
    }
    const status = this.#connection.status;
    if (status !== 'ready') {
      // A lazyConnect client is started as ioredis would on its first command; this call still
      // fails fast rather than waiting for the handshake.
      if (status === 'wait') this.#connection.connect().catch(noop);
      breaker?.failure();
      throw new HerdcacheError('E_STORE_UNAVAILABLE', `herdcache: ${this.#name} ${op} not sent: client status is "${status}"`);
    }
  }

  /**
   * Settles with `pending` or rejects with E_STORE_TIMEOUT, whichever comes first, and feeds the
   * breaker. A late answer is still observed (so a late rejection never becomes an unhandled one)
   * and is ignored: the call already failed as far as anyone is concerned.
   */
  bound<T>(op: string, pending: Promise<T>): Promise<T> {
    const breaker = this.#breaker;
    const timeout = this.#timeout;
    const name = this.#name;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        breaker?.failure();
        reject(new HerdcacheError('E_STORE_TIMEOUT', `herdcache: ${name} ${op} timed out after ${timeout} ms`));
      }, timeout);
      // The pending command keeps its socket alive anyway; the timer alone must not hold a process.
      timer.unref();
      pending.then(
        (value) => {
          if (settled) return;
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

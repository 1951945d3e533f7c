/**
 * Every store call of a registry goes through here, so a store that fails never fails a load: the
 * failure is counted (once for each source it affected, or under getOrCompute for calls of no
 * source), told to onStoreError, and the load goes on without the store (it computes the value).
 */
import { StorePartialError } from './errors';
import { type Observers, notify } from './hooks';
import type { Item, Source } from './item';
import type { Counters } from './types';
import { OutageMemo } from './outage';
import { UnsentInvalidations } from './unsent';

export class StoreCalls {
  /** What was filled while the store could not take it: read when the store cannot be read (./outage). */
  readonly outage = new OutageMemo();
  /** Invalidations the store failed to take: entries they cover are not read (./unsent). */
  readonly unsent = new UnsentInvalidations();
  /** Told when a call succeeds while invalidations are unsent (the store answers again: ./invalidation). */
  succeeded: (() => void) | undefined;
  /** Where failures of calls that concern no source are counted (getOrCompute's counters). */
  readonly #fallback: Counters;
  readonly #observers: Observers;

  constructor(fallback: Counters, observers: Observers) {
    this.#fallback = fallback;
    this.#observers = observers;
  }

  /**
   * `call()`'s result, or undefined when it failed (or its part, on a partial failure: `partly` is
   * told of it, with the positions that failed when the store knows them). Never rejects.
   */
  async call<T>(
    operation: string,
    call: () => Promise<T>,
    affected?: Source | readonly Item[],
    partly?: (failedAt: readonly number[] | undefined) => void,
  ): Promise<T | undefined> {
    let value: T;
    try {
      value = await call();
    } catch (error) {
      this.#countError(operation, error, affected);
      // Part of the call succeeded (a Cluster master down, the others fine): use that part.
      if (!(error instanceof StorePartialError)) return undefined;
      partly?.(error.failedAt);
      return error.partial as T;
    }
    // The store answers: invalidations waiting for a retry may go now (./invalidation). Never
    // turns the call into a failure.
    if (this.unsent.any)
      try {
        this.succeeded?.();
      } catch {
        // the retry's scheduling only
      }
    return value;
  }

  /**
   * A call over `n` parts (tags, keys) a store may take some of and fail the others (a Cluster
   * master down): true (all taken), false (none), or the positions it failed (the others taken).
   */
  async callParts(operation: string, work: () => unknown, n: number): Promise<boolean | readonly number[]> {
    let failedAt: readonly number[] | undefined;
    const took = await this.call(
      operation,
      async () => (await work(), true),
      undefined,
      (at) => (failedAt = at),
    );
    if (took === true) return true;
    return failedAt !== undefined && failedAt.length > 0 && failedAt.length < n ? failedAt : false;
  }

  /**
   * One failed call counts once (the sources' counters sum to the calls that failed): against the
   * source of the first key it carried when it carried several sources' keys (a tick's read).
   */
  #countError(operation: string, error: unknown, affected: Source | readonly Item[] | undefined): void {
    const first = Array.isArray(affected) ? (affected as readonly Item[])[0]?.source : (affected as Source | undefined);
    (first === undefined ? this.#fallback : first.counters).storeErrors++;
    notify(this.#observers.current.onStoreError, [error, operation]);
  }
}

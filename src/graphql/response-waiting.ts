/**
 * The contexts a response's re-execution may run with (./response-cache): those of the requests
 * waiting for the key, each lent once. A run apart (a stale response's refresh, a re-execution
 * after an invalidation abandoned the shared one) runs on a copy of one; the copy shares the
 * context's objects, a per-request memo among them, so a context lent twice would hand the second
 * run what the first read, maybe before an invalidation.
 */
export class WaitingContexts {
  /**
   * Per key, the context of the request waiting for it, or (several) a Several of them. Most keys
   * have one waiter, the request that executes it: no Set made for it, nor an identity hash for
   * its context (a Set's key needs one: an allocation per request).
   */
  readonly #waiting = new Map<string, unknown>();
  /** Contexts lent to a run apart: each is lent once. */
  readonly #lent = new WeakSet<object>();

  /**
   * Notes `context` as waiting for `key`, until end(key, context) or a lend takes it. An undefined
   * context is not noted: it has nothing to lend.
   */
  wait(key: string, context: unknown): void {
    if (context === undefined) return;
    const waiting = this.#waiting.get(key);
    if (waiting === undefined) this.#waiting.set(key, context);
    else if (waiting instanceof Several) waiting.add(context);
    else if (waiting !== context) this.#waiting.set(key, new Several([waiting, context]));
  }

  /** Ends the wait of `context` for `key` (nothing if a lend took it). */
  end(key: string, context: unknown): void {
    const waiting = this.#waiting.get(key);
    if (waiting instanceof Several) {
      if (waiting.delete(context) && waiting.size === 0) this.#waiting.delete(key);
    } else if (waiting !== undefined && waiting === context) this.#waiting.delete(key);
  }

  /** Whether a request waits for `key` (besides those that ended their wait). */
  has(key: string): boolean {
    return this.#waiting.has(key);
  }

  /** Keys with waiting requests (leak checks). */
  get size(): number {
    return this.#waiting.size;
  }

  /** Whether `context` was lent to a run apart. */
  lent(context: unknown): boolean {
    return this.#lent.has(context as object);
  }

  /**
   * A context for one run apart, never lent before: `own` (a stale-served request's), else the
   * context of a request waiting for the key, taken: each re-execution (one per invalidation that
   * abandoned the last) takes another waiter's. Undefined: none left to lend.
   */
  lend(key: string, own: unknown): unknown {
    let context = own;
    if (context === undefined || this.#lent.has(context as object)) {
      context = undefined;
      const waiting = this.#waiting.get(key);
      if (waiting instanceof Several) {
        for (const candidate of waiting) {
          waiting.delete(candidate);
          if (!this.#lent.has(candidate as object)) {
            context = candidate;
            break;
          }
        }
        if (waiting.size === 0) this.#waiting.delete(key); // its waiters' own ends find nothing left
      } else if (waiting !== undefined) {
        this.#waiting.delete(key);
        if (!this.#lent.has(waiting as object)) context = waiting;
      }
      if (context === undefined) return undefined;
    }
    if (context !== null && typeof context === 'object') this.#lent.add(context);
    return context;
  }
}

/** Several requests' contexts waiting for one key (a class: a context that is a Set stays one context). */
class Several extends Set<unknown> {}

/**
 * The contexts a response's re-execution may run with (./response-cache): those of the requests
 * waiting for the key, each lent once. A run apart (a stale response's refresh, a re-execution
 * after an invalidation abandoned the shared one) runs on a copy of one; the copy shares the
 * context's objects, a per-request memo among them, so a context lent twice would hand the second
 * run what the first read, maybe before an invalidation.
 */
export class WaitingContexts {
  /** Per key, the contexts of the requests waiting for it. */
  readonly #waiting = new Map<string, Set<unknown>>();
  /** Contexts lent to a run apart: each is lent once. */
  readonly #lent = new WeakSet<object>();

  /** Notes `context` as waiting for `key`; the returned function ends its wait. */
  wait(key: string, context: unknown): () => void {
    let waiters = this.#waiting.get(key);
    if (waiters === undefined) this.#waiting.set(key, (waiters = new Set()));
    waiters.add(context);
    const set = waiters;
    return () => {
      if (set.delete(context) && set.size === 0 && this.#waiting.get(key) === set) this.#waiting.delete(key);
    };
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
      const waiters = this.#waiting.get(key);
      if (waiters !== undefined) {
        for (const candidate of waiters) {
          waiters.delete(candidate);
          if (!this.#lent.has(candidate as object)) {
            context = candidate;
            break;
          }
        }
        if (waiters.size === 0) this.#waiting.delete(key); // its waiters' own ends find nothing left
      }
      if (context === undefined) return undefined;
    }
    if (context !== null && typeof context === 'object') this.#lent.add(context);
    return context;
  }
}

/**
 * A fill call's run: what the miss pipeline (core/fill-write) gives one call of a source's function
 * and the flights it computes (Flight.run), so the last flight abandoned aborts the call's signal.
 */
/** What a fill call is given: the signal of its run, read when wanted (see FillRun). */
export interface FillSignal {
  readonly signal: AbortSignal;
}

/**
 * One call of a fill or batch function, shared by the flights it computes. Its signal fires
 * when the last of them is abandoned: aborting earlier would cancel work others still want.
 *
 * The signal is made when first read (most fills never read it, and an AbortController costs a
 * few µs, an EventTarget's setup): read after the last flight was abandoned, it is already aborted
 * with that reason, as it would have been.
 */
export class FillRun implements FillSignal {
  #controller: AbortController | undefined;
  #live: number;
  #aborted = false;
  #reason: unknown;
  /**
   * A late-tagged run's check when its value's tags are known (FlightTable.abandonLate, over its
   * flights): whether one of them was invalidated while it ran, its flights then abandoned.
   */
  lateCheck: ((tags: readonly string[], anyTag: boolean) => boolean) | undefined = undefined;
  /** A late-tagged run's callers now, over its flights (whoever asked: any plugin, any path). */
  callers: (() => number) | undefined = undefined;
  /** Called once every flight it computes was abandoned (its result will not be written): see core/fill-write. */
  onAbandoned: (() => void) | undefined = undefined;

  constructor(flights: number) {
    this.#live = flights;
  }

  get signal(): AbortSignal {
    let controller = this.#controller;
    if (controller === undefined) {
      controller = this.#controller = new AbortController();
      if (this.#aborted) controller.abort(this.#reason);
    }
    return controller.signal;
  }

  /** Whether every flight it computes was abandoned (read without making the signal). */
  get abandoned(): boolean {
    return this.#live === 0;
  }

  release(reason: unknown): void {
    if (--this.#live !== 0) return;
    if (this.#controller !== undefined) this.#controller.abort(reason);
    else {
      this.#aborted = true;
      this.#reason = reason;
    }
    this.onAbandoned?.();
  }
}

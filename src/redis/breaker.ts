/**
 * A circuit breaker for a store on the network.
 *
 * While a store is failing, every call would otherwise pay a command timeout before the registry
 * computes the value anyway. After `threshold` consecutive failures the breaker opens: calls fail
 * at once, for a cool-down. Then exactly one trial call goes through (half-open): its success
 * closes the breaker, its failure opens it again for twice the previous cool-down (from `coolDown`
 * up to `maxCoolDown`), so a long outage costs one trial call every few seconds and a short one
 * is left within a fraction of a second. Nobody has to reset it.
 *
 * The cool-down is a guess at when Redis answers again; the guard (guard.ts) ends it as soon as it
 * knows better: a call that timed out and is answered after all ends it at once (the next call is
 * the trial), and a client that reconnected and passed its ready check closes the breaker.
 */

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. Default 5. */
  threshold?: number;
  /** Milliseconds the breaker stays open the first time before one trial call is let through. Default 250. */
  coolDown?: number;
  /** Each failed trial doubles the cool-down, up to this many milliseconds. Default 5000. */
  maxCoolDown?: number;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

export class CircuitBreaker {
  readonly #threshold: number;
  readonly #coolDown: number;
  readonly #maxCoolDown: number;
  readonly #now: () => number;
  #failures = 0;
  #openUntil = 0;
  /** The cool-down the next opening gets: `coolDown`, doubled by each failed trial. */
  #current: number;
  #trialInFlight = false;

  constructor(threshold: number, coolDown: number, maxCoolDown: number = coolDown, now: () => number = Date.now) {
    this.#threshold = threshold;
    this.#coolDown = coolDown;
    this.#maxCoolDown = Math.max(coolDown, maxCoolDown);
    this.#current = coolDown;
    this.#now = now;
  }

  get state(): BreakerState {
    if (this.#failures < this.#threshold) return 'closed';
    return this.#now() < this.#openUntil ? 'open' : 'half-open';
  }

  /** The cool-down the breaker opens (or opened) for, ms. */
  get coolDown(): number {
    return this.#current;
  }

  /** Whether a call may be sent now. A `true` in half-open makes that call the one trial. */
  admit(): boolean {
    if (this.#failures < this.#threshold) return true;
    if (this.#trialInFlight || this.#now() < this.#openUntil) return false;
    this.#trialInFlight = true;
    return true;
  }

  success(): void {
    this.#failures = 0;
    this.#trialInFlight = false;
    this.#current = this.#coolDown;
  }

  failure(): void {
    const trial = this.#trialInFlight;
    this.#trialInFlight = false;
    // Capped so a long outage cannot overflow the count; only "at least threshold" matters.
    if (this.#failures < this.#threshold) this.#failures++;
    if (this.#failures < this.#threshold) return;
    // A failed trial: the store is still down, wait longer before the next one.
    if (trial) this.#current = Math.min(2 * this.#current, this.#maxCoolDown);
    // Re-armed on every failure once open: a failed trial (or a straggler from before the
    // opening) starts a fresh cool-down rather than letting calls through early.
    this.#openUntil = this.#now() + this.#current;
  }

  /**
   * The store answered again (a call that had timed out got its reply): the cool-down ends now,
   * and the next call is the trial. Not a close: a store that answers slowly, after the timeout,
   * would otherwise be let through in full and make every call pay the timeout again.
   */
  answered(): void {
    if (this.#failures >= this.#threshold) this.#openUntil = 0;
  }
}

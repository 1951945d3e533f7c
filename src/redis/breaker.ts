/**
 * A circuit breaker for a store on the network.
 *
 * While a store is failing, every call would otherwise pay a command timeout before the registry
 * computes the value anyway. After `threshold` consecutive failures the breaker opens: calls fail
 * at once, for `coolDown` ms. Then exactly one trial call goes through (half-open): its success
 * closes the breaker, its failure opens it for another cool-down. Nobody has to reset it.
 */

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. Default 5. */
  threshold?: number;
  /** Milliseconds the breaker stays open before one trial call is let through. Default 5000. */
  coolDown?: number;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

export class CircuitBreaker {
  readonly #threshold: number;
  readonly #coolDown: number;
  readonly #now: () => number;
  #failures = 0;
  #openUntil = 0;
  #trialInFlight = false;

  constructor(threshold: number, coolDown: number, now: () => number = Date.now) {
    this.#threshold = threshold;
    this.#coolDown = coolDown;
    this.#now = now;
  }

  get state(): BreakerState {
    if (this.#failures < this.#threshold) return 'closed';
    return this.#now() < this.#openUntil ? 'open' : 'half-open';
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
  }

  failure(): void {
    this.#trialInFlight = false;
    // Capped so a long outage cannot overflow the count; only "at least threshold" matters.
    if (this.#failures < this.#threshold) this.#failures++;
    // Re-armed on every failure once open: a failed trial (or a straggler from before the
    // opening) starts a fresh cool-down rather than letting calls through early.
    if (this.#failures >= this.#threshold) this.#openUntil = this.#now() + this.#coolDown;
  }
}

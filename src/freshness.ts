/**
 * The entry envelope and the arithmetic of time: ttl, grace (stale-while-revalidate), jitter.
 * Freshness lives inside the entry so a hit needs no second lookup (no PTTL round trip on Redis).
 */

/** What a store holds for one key. `value` is never `undefined` (undefined means "nothing to cache"). */
export interface Entry<V = unknown> {
  readonly value: V;
  /** Epoch ms until which the value is fresh. `Infinity`: never stale. */
  readonly freshUntil: number;
  /** Epoch ms until which the value may be served stale. Always `>= freshUntil`. `Infinity`: never expires. */
  readonly staleUntil: number;
}

/** Time source, injectable so tests move time instead of sleeping. Returns epoch milliseconds. */
export interface Clock {
  now(): number;
  /** Waits `ms` (the lock poll's backoff). Default: a real timer. A test clock advances itself instead. */
  sleep?(ms: number): Promise<void>;
}

export const systemClock: Clock = { now: Date.now };

export interface ManualClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
  /** Every sleep asked of this clock, in order (the poll backoff, for tests). */
  readonly sleeps: number[];
  sleep(ms: number): Promise<void>;
}

/** A clock tests move by hand; its sleep advances virtual time and resolves on the next turn. */
export function manualClock(start = 1_700_000_000_000): ManualClock {
  let current = start;
  const sleeps: number[] = [];
  return {
    now: () => current,
    advance(ms: number) {
      current += ms;
    },
    set(ms: number) {
      current = ms;
    },
    sleeps,
    sleep(ms: number) {
      sleeps.push(ms);
      current += ms;
      return new Promise((resolve) => setImmediate(resolve));
    },
  };
}

/**
 * Multiplies `base` by a factor drawn uniformly from [1 - fraction, 1 + fraction].
 * Keys written together (a batch, a warm-up) then expire apart instead of stampeding together.
 * `fraction` is clamped to [0, 1]; a non-finite fraction means no jitter.
 */
export function jitteredTtl(base: number, fraction: number): number {
  if (!Number.isFinite(fraction) || fraction <= 0 || !Number.isFinite(base)) return base;
  const f = fraction > 1 ? 1 : fraction;
  return base * (1 + f * (2 * Math.random() - 1));
}

/** Freshness policy resolved from options: all in milliseconds. */
export interface Freshness {
  /** `undefined`: never stale. */
  readonly ttl: number | undefined;
  /** Grace after ttl during which a stale value is served while one refresh runs. 0: no SWR. */
  readonly swr: number;
  readonly jitter: number;
}

export function makeEntry<V>(value: V, now: number, policy: Freshness): Entry<V> {
  if (policy.ttl === undefined) return { value, freshUntil: Infinity, staleUntil: Infinity };
  const freshUntil = now + jitteredTtl(policy.ttl, policy.jitter);
  return { value, freshUntil, staleUntil: freshUntil + policy.swr };
}

/** Milliseconds a store should keep the entry physically: until the end of grace. */
export function physicalTtl(entry: Entry, now: number): number {
  return entry.staleUntil === Infinity ? Infinity : Math.max(1, Math.ceil(entry.staleUntil - now));
}

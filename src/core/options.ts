/**
 * Defaults in one place, validated once, with errors that name the option and the bad value.
 */
import { invalidArgument, invalidOption } from './errors';
import type { Freshness } from './freshness';
import type { FreshnessOptions, LockOptions } from './types';

export const DEFAULTS = {
  /**
   * Coalesce-only: nothing is stored, concurrent misses still share one fill. Storing values is
   * always an explicit choice (a `ttl`), so code written for DataLoader never serves data older
   * than the fill it joined.
   */
  ttl: 0,
  swr: 0,
  jitter: 0,
  maxRefreshes: 64,
  lockTtl: 10_000,
  lockPollInterval: 50,
  lockWaitTimeout: 5_000,
  /** Poll backoff doubles from lockPollInterval up to this cap (seed 000). */
  lockPollCap: 1_000,
} as const;

/** Whether values under this policy are stored at all: `ttl: 0` is coalesce-only (no read, lock or write). */
export function storesValues(policy: Freshness): boolean {
  return policy.ttl !== 0;
}

/** Freshness plus whether the distributed fill lock is used, and a getOrCompute call's tags. */
export interface Policy extends Freshness {
  readonly lock: boolean;
  readonly tags?: readonly string[];
}

/** A `signal` option, when given, must be an AbortSignal (checked before any flight starts). */
export function checkSignal(options: { signal?: unknown } | undefined): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidOption('signal', signal, 'an AbortSignal');
}

export function checkTags(name: string, tags: unknown): readonly string[] {
  if (!Array.isArray(tags) || !tags.every((tag) => typeof tag === 'string' && tag.length > 0)) {
    throw invalidOption(name, tags, 'an array of non-empty strings');
  }
  return tags;
}

export function checkDuration(name: string, value: unknown, allowZero: boolean): number {
  if (typeof value !== 'number' || Number.isNaN(value) || value < 0 || (!allowZero && value === 0) || value === -Infinity) {
    throw invalidOption(name, value, allowZero ? 'a number of milliseconds >= 0' : 'a number of milliseconds > 0');
  }
  return value;
}

function checkFraction(name: string, value: unknown): number {
  // Non-finite means "no jitter" (as jitteredTtl does); out-of-range finite values are clamped there.
  if (typeof value !== 'number') throw invalidOption(name, value, 'a number in [0, 1]');
  return value;
}

export function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw invalidOption(name, value, 'a boolean');
  return value;
}

export function checkPositiveInteger(name: string, value: unknown, allowInfinity = false): number {
  if (typeof value === 'number' && ((allowInfinity && value === Infinity) || (Number.isSafeInteger(value) && value >= 1))) return value;
  throw invalidOption(name, value, allowInfinity ? 'a positive integer or Infinity' : 'a positive integer');
}

/** Resolves `options` on top of `base`; an option left undefined keeps the base value. */
export function resolvePolicy(options: FreshnessOptions | undefined, base: Policy, prefix = ''): Policy {
  if (options === undefined) return base;
  const { ttl, swr, jitter, lock, earlyRefresh } = options;
  if (ttl === undefined && swr === undefined && jitter === undefined && lock === undefined && earlyRefresh === undefined) return base;
  const policy: Policy = {
    ttl: ttl === undefined ? base.ttl : checkDuration(`${prefix}ttl`, ttl, true),
    swr: swr === undefined ? base.swr : checkDuration(`${prefix}swr`, swr, true),
    jitter: jitter === undefined ? base.jitter : checkFraction(`${prefix}jitter`, jitter),
    lock: lock === undefined ? base.lock : checkBoolean(`${prefix}lock`, lock),
    beta: earlyRefresh === undefined ? base.beta : checkBeta(`${prefix}earlyRefresh`, earlyRefresh),
  };
  // Grace and early refresh act on stored values: asked for where nothing is stored, they are a
  // mistake (most likely a forgotten ttl, since no ttl means coalesce-only), not a no-op.
  if (policy.ttl === 0) {
    if (swr !== undefined && policy.swr > 0) throw invalidOption(`${prefix}swr`, swr, '0 when ttl is 0 (coalesce-only stores nothing to serve stale): set a ttl');
    if (earlyRefresh !== undefined && policy.beta > 0) throw invalidOption(`${prefix}earlyRefresh`, earlyRefresh, 'off when ttl is 0 (coalesce-only stores nothing to refresh): set a ttl');
  }
  return policy;
}

function checkBeta(name: string, value: unknown): number {
  if (value === true) return 1;
  if (value === false) return 0;
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
  throw invalidOption(name, value, 'a boolean or a finite number >= 0 (beta)');
}

export interface LockTiming {
  readonly lockTtl: number;
  readonly lockPollInterval: number;
  readonly lockWaitTimeout: number;
}

export function resolveLockTiming(options: LockOptions): LockTiming {
  return {
    lockTtl: checkDuration('lockTtl', options.lockTtl ?? DEFAULTS.lockTtl, false),
    lockPollInterval: checkDuration('lockPollInterval', options.lockPollInterval ?? DEFAULTS.lockPollInterval, false),
    lockWaitTimeout: checkDuration('lockWaitTimeout', options.lockWaitTimeout ?? DEFAULTS.lockWaitTimeout, true),
  };
}

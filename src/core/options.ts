/**
 * Defaults in one place, validated once, with errors that name the option and the bad value.
 */
import { HerdcacheError, describe, invalidArgument, invalidOption } from './errors';
import {
  checkGetter,
  checkKnownKeys,
  getterThrew,
  inheritedOption,
  notAnOptionsObject,
  optionNames,
  unknownOption,
} from './option-names';
import { type Clock, type Freshness, guardedClock, jittered } from './freshness';
import type {
  CacheOptions,
  FreshnessOptions,
  GetOrComputeOptions,
  LoadOptions,
  LoaderOptions,
  LockOptions,
  RequestOptions,
} from './types';

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
  /** @internal Fills may return LateTagged values: invalidated tags are checked when they end (see late-tags). */
  readonly lateTags?: boolean;
  /**
   * @internal No ttl was given anywhere (cache, loader, call) and the store keeps values for other
   * processes (Redis, tiered): the first load of each loader or getOrCompute warns (NO_TTL_WARNING)
   * that nothing is stored. An explicit `ttl: 0` drops it: coalescing only on purpose is silent.
   */
  readonly ttlUnset?: boolean;
}

/** The `process.emitWarning` code of a load that stores nothing on a shared store for want of a ttl. */
export const NO_TTL_WARNING = 'HERDCACHE_NO_TTL';

export { checkKnownKeys, checkNestedKeys, optionNames } from './option-names';

/**
 * An option's value, or `fallback` when it is left out. Only `undefined` means left out: `null`
 * is a value like any other, checked and refused where an option takes no null (one rule for
 * every option; JSON configs omit a key to get its default).
 */
export function givenOr<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value;
}

/** A `signal` option, when given, must be an AbortSignal (checked before any flight starts). */
export function checkSignal(options: { signal?: unknown } | undefined): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
  let signal: unknown;
  try {
    signal = options.signal;
  } catch (error) {
    throw getterThrew('options', 'signal', error); // named, not raw
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidOption('signal', signal, 'an AbortSignal');
}

/**
 * `tags` (option or argument `name`): an array of non-empty strings. The error names the first
 * item that is not one (`array(2) whose item 1 is ""`): `array(2)` alone does not say which.
 */
export function checkTags(name: string, tags: unknown, argument = false): readonly string[] {
  if (!Array.isArray(tags)) {
    throw (argument ? invalidArgument : invalidOption)(name, tags, 'an array of non-empty strings');
  }
  for (let i = 0; i < tags.length; i++) {
    const tag: unknown = tags[i];
    if (typeof tag === 'string' && tag.length > 0) continue;
    throw new HerdcacheError(
      argument ? 'E_INVALID_ARGUMENT' : 'E_INVALID_OPTION',
      `herdcache: ${argument ? 'argument' : 'option'} "${name}" must be an array of non-empty strings, got ${describe(tags)} whose item ${i} is ${describe(tag)}`,
    );
  }
  return tags;
}

/**
 * The longest finite duration accepted, in ms (about 31,700 years). Every store can keep it: an
 * entry's times (now + ttl + swr, jittered) stay exact integers in a double and in JSON, and
 * Redis accepts it as a PX (its limit: the expiry time must fit a signed 64-bit integer, which
 * 1e19 does not). A value that cannot work is refused here, at configuration, rather than
 * failing every write or every lock call later.
 */
export const MAX_DURATION = 1e15;

/** setTimeout's ceiling: a longer delay fires at once (Node warns and uses 1 ms). */
export const MAX_TIMER = 2 ** 31 - 1;

/**
 * A duration in ms: finite, within MAX_DURATION (`max` when lower), > 0 unless `allowZero`;
 * Infinity only with `allowInfinity` (a ttl or grace that never ends: stored without expiry).
 */
export function checkDuration(
  name: string,
  value: unknown,
  allowZero: boolean,
  allowInfinity = false,
  max = MAX_DURATION,
): number {
  if (
    typeof value === 'number' &&
    ((value >= 0 && value <= max && (allowZero || value > 0)) || (allowInfinity && value === Infinity))
  )
    return value;
  const range = `${allowZero ? '>= 0' : '> 0'} and at most ${max === MAX_DURATION ? '1e15' : max}`;
  throw invalidOption(name, value, `a number of milliseconds ${range}${allowInfinity ? ', or Infinity' : ''}`);
}

/**
 * `base` (ms) multiplied by a factor drawn uniformly from [1 - fraction, 1 + fraction]: keys
 * written together (a batch, a warm-up) then expire apart instead of stampeding together. `base`
 * is checked as the `ttl` option is (NaN, a negative or a string came back as a ttl no store can
 * keep); an infinite one stays infinite. `fraction` is clamped to [0, 1], a non-finite one means
 * no jitter (as documented since 0.1); only a non-number is refused.
 */
export function jitteredTtl(base: number, fraction: number): number {
  if (typeof base !== 'number' || !(base >= 0) || (base > MAX_DURATION && base !== Infinity))
    throw invalidArgument('base', base, 'a number of milliseconds >= 0 (at most 1e15, or Infinity)');
  if (typeof fraction !== 'number') throw invalidArgument('fraction', fraction, 'a number (clamped to [0, 1])');
  return jittered(base, fraction);
}

function checkFraction(name: string, value: unknown): number {
  // jitteredTtl would clamp it; as an option, a value outside [0, 1] is a mistake, said at once.
  if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw invalidOption(name, value, 'a number in [0, 1]');
  return value;
}

/**
 * The `clock` option: an object with a now() method, read once here: a clock that answers NaN or
 * a string would date every entry NaN (never fresh, never stale) and fail no call to say so.
 */
export function checkClock(clock: Clock): Clock {
  if (typeof clock?.now !== 'function') throw invalidOption('clock', clock, 'an object with a now() method');
  let now: unknown;
  try {
    now = clock.now();
  } catch (error) {
    const thrown = error instanceof Error ? error.message : describe(error);
    throw invalidOption('clock', clock, `an object whose now() returns the time (it threw: ${thrown})`);
  }
  if (typeof now !== 'number' || !Number.isFinite(now))
    throw invalidOption(
      'clock',
      clock,
      `an object whose now() returns a finite number of ms (it returned ${describe(now)})`,
    );
  const sleep = (clock as { sleep?: unknown }).sleep;
  if (sleep !== undefined && typeof sleep !== 'function')
    throw invalidOption('clock.sleep', sleep, 'a function (ms) => Promise<void>, or left out');
  return guardedClock(clock, now);
}

export function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw invalidOption(name, value, 'a boolean');
  return value;
}

export function checkPositiveInteger(name: string, value: unknown, allowInfinity = false): number {
  if (
    typeof value === 'number' &&
    ((allowInfinity && value === Infinity) || (Number.isSafeInteger(value) && value >= 1))
  )
    return value;
  throw invalidOption(name, value, allowInfinity ? 'a positive integer or Infinity' : 'a positive integer');
}

export const CACHE_OPTIONS = optionNames<CacheOptions>({
  ttl: true,
  swr: true,
  jitter: true,
  lock: true,
  earlyRefresh: true,
  lockTtl: true,
  lockPollInterval: true,
  lockWaitTimeout: true,
  store: true,
  clock: true,
  maxRefreshes: true,
  hooks: true,
});
export const REQUEST_OPTIONS = optionNames<RequestOptions>({ signal: true });
const LOAD_OPTIONS = optionNames<LoadOptions>({ signal: true });

/**
 * A load's options (loader.load, loadMany, a scoped loader's): an object of known names, its signal
 * an AbortSignal. A misspelt `signal` would otherwise be dropped: the load would never abort.
 */
export function checkLoadOptions(where: string, options: LoadOptions): void {
  checkSignal(options);
  checkKnownKeys(where, options, LOAD_OPTIONS);
}
export const GET_OR_COMPUTE_OPTIONS = optionNames<GetOrComputeOptions>({
  ttl: true,
  swr: true,
  jitter: true,
  lock: true,
  earlyRefresh: true,
  signal: true,
  label: true,
  tags: true,
});

/**
 * checkKnownKeys, with the same refusals, for a getOrCompute call's options, which runs on every
 * call: each name is compared in a switch (~4 ns) rather than looked up in the Set (~15 ns,
 * measured on a hit); GET_OR_COMPUTE_OPTIONS stays the authority (a name the switch lacks is
 * looked up there) and the list the error shows.
 */
export function checkGetOrComputeKeys(where: string, options: object): void {
  if (Array.isArray(options)) throw notAnOptionsObject(options, '');
  for (const name in options) {
    if (!isGetOrComputeOption(name)) throw unknownOption(where, name, GET_OR_COMPUTE_OPTIONS, '');
    if (!hasOwn.call(options, name)) throw inheritedOption(where, name, '');
    checkGetter(where, options, name);
  }
}

/**
 * Whether `options` is an object literal of getOrCompute options (checkGetOrComputeKeys, without
 * the error). One prototype check rather than an own-property check per name (~5 ns a call on a
 * hit): a literal's names are its own, and anything else (an array, an Object.create(...), an
 * object of another realm) takes the full path, which refuses or resolves it.
 */
function onlyGetOrComputeKeys(options: object): boolean {
  if (Object.getPrototypeOf(options) !== Object.prototype) return false;
  for (const name in options) if (!isGetOrComputeOption(name)) return false;
  return true;
}

const hasOwn = Object.prototype.hasOwnProperty;

/** A getOrCompute call's option values (its tags are resolved on every call) and what they resolved to. */
export type Resolved<T> = Omit<GetOrComputeOptions, 'signal' | 'tags'> & { readonly computation: T };

/**
 * Whether `options` holds the values `resolved` was made from: compared one by one on every call,
 * so a mutated or new options object never gets a stale resolution.
 */
export function holdsValues(options: GetOrComputeOptions, resolved: Resolved<unknown>): boolean {
  return (
    options.ttl === resolved.ttl &&
    options.swr === resolved.swr &&
    options.jitter === resolved.jitter &&
    options.lock === resolved.lock &&
    options.earlyRefresh === resolved.earlyRefresh &&
    options.label === resolved.label
  );
}

/**
 * `resolved`'s computation when a call's `options` (checked in nothing yet) may reuse it as they
 * are: its values, no signal, no tags, and only getOrCompute's names; else undefined (the full path
 * then resolves them, or refuses them). Allocation-free.
 */
export function reusable<T>(options: GetOrComputeOptions, resolved: Resolved<T> | undefined): T | undefined {
  try {
    if (
      resolved === undefined ||
      typeof options !== 'object' ||
      options === null ||
      !holdsValues(options, resolved) ||
      options.signal !== undefined ||
      options.tags !== undefined ||
      !onlyGetOrComputeKeys(options)
    )
      return undefined;
  } catch {
    return undefined; // an options getter that throws: the full path names it (a rejection, never a throw)
  }
  return resolved.computation;
}

function isGetOrComputeOption(name: string): boolean {
  // Typed cases: the compiler refuses a label that is not an option name.
  switch (name as keyof Required<GetOrComputeOptions>) {
    case 'ttl':
    case 'swr':
    case 'jitter':
    case 'lock':
    case 'earlyRefresh':
    case 'signal':
    case 'label':
    case 'tags':
      return true;
    default:
      return GET_OR_COMPUTE_OPTIONS.has(name);
  }
}

export const LOADER_OPTIONS = optionNames<LoaderOptions<unknown, unknown>>({
  ttl: true,
  swr: true,
  jitter: true,
  lock: true,
  earlyRefresh: true,
  name: true,
  batch: true,
  key: true,
  maxBatchSize: true,
  batchScheduleFn: true,
  tags: true,
});

/** Resolves `options` on top of `base`; an option left undefined keeps the base value. */
export function resolvePolicy(options: FreshnessOptions | undefined, base: Policy, prefix = ''): Policy {
  if (options === undefined) return base;
  const { ttl, swr, jitter, lock, earlyRefresh } = options;
  if (
    ttl === undefined &&
    swr === undefined &&
    jitter === undefined &&
    lock === undefined &&
    earlyRefresh === undefined
  )
    return base;
  const policy: Policy = {
    ttl: ttl === undefined ? base.ttl : checkDuration(`${prefix}ttl`, ttl, true, true),
    swr: swr === undefined ? base.swr : checkDuration(`${prefix}swr`, swr, true, true),
    jitter: jitter === undefined ? base.jitter : checkFraction(`${prefix}jitter`, jitter),
    lock: lock === undefined ? base.lock : checkBoolean(`${prefix}lock`, lock),
    beta: earlyRefresh === undefined ? base.beta : checkBeta(`${prefix}earlyRefresh`, earlyRefresh),
    ...(ttl === undefined && base.ttlUnset === true ? { ttlUnset: true } : undefined),
  };
  // Grace and early refresh act on stored values: asked for where nothing is stored, they are a
  // mistake (most likely a forgotten ttl, since no ttl means coalesce-only), not a no-op.
  if (policy.ttl === 0) {
    if (swr !== undefined && policy.swr > 0)
      throw invalidOption(
        `${prefix}swr`,
        swr,
        '0 when ttl is 0 (coalesce-only stores nothing to serve stale): set a ttl',
      );
    if (earlyRefresh !== undefined && policy.beta > 0)
      throw invalidOption(
        `${prefix}earlyRefresh`,
        earlyRefresh,
        'off when ttl is 0 (coalesce-only stores nothing to refresh): set a ttl',
      );
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
    // A lock must expire (a dead holder frees the key) and a wait must end (bounded damage).
    lockTtl: checkDuration('lockTtl', givenOr(options.lockTtl, DEFAULTS.lockTtl), false),
    lockPollInterval: checkDuration(
      'lockPollInterval',
      givenOr(options.lockPollInterval, DEFAULTS.lockPollInterval),
      false,
      false,
      MAX_TIMER,
    ),
    lockWaitTimeout: checkDuration('lockWaitTimeout', givenOr(options.lockWaitTimeout, DEFAULTS.lockWaitTimeout), true),
  };
}

/**
 * Errors raised by herdcache itself carry a stable `code`. Errors thrown by user code
 * (fills, batch functions) are never wrapped: they reach every caller as the same object.
 */
import { types } from 'node:util';
export type HerdcacheErrorCode =
  | 'E_INVALID_OPTION'
  | 'E_INVALID_ARGUMENT'
  | 'E_INVALID_KEY'
  | 'E_DUPLICATE_LOADER'
  | 'E_BATCH_NOT_ARRAY'
  | 'E_BATCH_LENGTH'
  | 'E_FILL_NON_ERROR'
  | 'E_INVALIDATED'
  | 'E_ABANDONED'
  | 'E_CLOSED'
  | 'E_UNSUPPORTED'
  /**
   * A @cached PUBLIC field failed in a computation another session started: its joiners of other
   * sessions get this error, with the original as its (non-enumerable) `cause`, never the original.
   */
  | 'E_SHARED_FAILURE'
  /** A store command did not answer within the store's command timeout. */
  | 'E_STORE_TIMEOUT'
  /** The store's connection is not ready (down, reconnecting); nothing was sent. */
  | 'E_STORE_UNAVAILABLE'
  /** The store's circuit breaker is open after repeated failures; nothing was sent. */
  | 'E_CIRCUIT_OPEN'
  /** The store answered with an error (the server's error is the `cause`). */
  | 'E_STORE_ERROR'
  /** A value could not be encoded by the store's codec (reported, not stored). */
  | 'E_STORE_ENCODE'
  /** A value's payload is larger than the store's maxValueBytes (reported, not stored). */
  | 'E_VALUE_TOO_LARGE'
  /** A stored payload could not be decoded by the store's codec (reported, read as a miss). */
  | 'E_STORE_DECODE';

export class HerdcacheError extends Error {
  readonly code: HerdcacheErrorCode;

  constructor(code: HerdcacheErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HerdcacheError';
    this.code = code;
  }

  /** A HerdcacheKeyError is one too (it extends TypeError, for DataLoader's contract). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // `this` is HerdcacheError itself when its parent is Error (not a subclass). Not written as
    // `this === HerdcacheError`: a class naming itself in its body is renamed by the bundler.
    return (
      Function.prototype[Symbol.hasInstance].call(this, value) ||
      (Object.getPrototypeOf(this) === Error &&
        (value instanceof HerdcacheKeyError || value instanceof HerdcacheBatchError))
    );
  }
}

/**
 * A key a loader cannot load (null, undefined, or one its key function maps to no string),
 * thrown synchronously by load() as DataLoader throws its TypeError; `code` is E_INVALID_KEY and
 * `instanceof HerdcacheError` holds.
 */
export class HerdcacheKeyError extends TypeError {
  readonly code = 'E_INVALID_KEY' as const;

  constructor(message: string) {
    super(message);
    this.name = 'HerdcacheError';
  }
}

/**
 * A batch function's result that is not one value per key (not an array: E_BATCH_NOT_ARRAY; another
 * length: E_BATCH_LENGTH), the error every key of the batch is rejected with. A TypeError, as
 * DataLoader's is for the same mistake; `instanceof HerdcacheError` holds.
 */
export class HerdcacheBatchError extends TypeError {
  readonly code: 'E_BATCH_NOT_ARRAY' | 'E_BATCH_LENGTH';

  constructor(code: 'E_BATCH_NOT_ARRAY' | 'E_BATCH_LENGTH', message: string) {
    super(message);
    this.name = 'HerdcacheError';
    this.code = code;
  }
}

/**
 * Whether `value` is an Error: of this realm (`instanceof`, subclasses and objects made from
 * Error.prototype included) or of another one (a `vm` context, a test runner's sandbox), whose
 * errors `instanceof Error` does not see. A fill's error is never cached as a value, whatever realm made it.
 */
export function isError(value: unknown): value is Error {
  return value instanceof Error || (typeof value === 'object' && value !== null && types.isNativeError(value));
}

/**
 * A store call that failed for part of its keys only (a Redis Cluster master down or slow): the
 * call counts as failed (reported, counted), and `partial` holds its answer for the keys that
 * succeeded, in the call's own result shape, with the failed keys' positions empty (undefined,
 * or NaN for tag versions), so the registry keeps the hits, locks and writes of healthy nodes.
 */
export class StorePartialError extends HerdcacheError {
  constructor(
    readonly failure: unknown,
    readonly partial: unknown,
    message: string,
    /**
     * Positions (in the call's keys) whose part failed, when the store knows them: their answers
     * in `partial` are unknown, not misses (a read's outage hold serves them: core/outage).
     */
    readonly failedAt?: readonly number[],
  ) {
    super((failure as { code?: HerdcacheErrorCode } | null)?.code ?? 'E_STORE_ERROR', message, { cause: failure });
    this.name = 'StorePartialError';
  }
}

/** Renders a user-supplied value for an error message: short, and safe for symbols and cycles. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return `${String(value)}${typeof value === 'bigint' ? 'n' : ''}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return `function ${value.name || '(anonymous)'}`;
  if (typeof value === 'symbol') return value.toString();
  if (Array.isArray(value)) return `array(${value.length})`;
  return `object ${Object.prototype.toString.call(value)}`;
}

export function invalidOption(name: string, value: unknown, expected: string): HerdcacheError {
  return new HerdcacheError(
    'E_INVALID_OPTION',
    `herdcache: option "${name}" must be ${expected}, got ${describe(value)}`,
  );
}

export function invalidArgument(name: string, value: unknown, expected: string): HerdcacheError {
  return new HerdcacheError(
    'E_INVALID_ARGUMENT',
    `herdcache: argument "${name}" must be ${expected}, got ${describe(value)}`,
  );
}

/** Whether `value` is a promise or another thenable (a getter that throws: not one). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  try {
    return typeof (value as { then?: unknown }).then === 'function';
  } catch {
    return false;
  }
}

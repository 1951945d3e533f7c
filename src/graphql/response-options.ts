/**
 * The response layer's options, checked once when its plugin is created: an unknown name or a bad
 * value is refused then (E_INVALID_OPTION, naming `responseCache.<option>` and the value), never
 * found out request by request.
 */
import { invalidOption } from '../core/errors';
import { MAX_DURATION, checkKnownKeys, optionNames } from '../core/options';
import type { ResponseCacheOptions } from './response-types';

const OPTIONS = optionNames<ResponseCacheOptions>({
  sessionId: true,
  vary: true,
  enabled: true,
  maxBytes: true,
  defaultMaxAge: true,
  swr: true,
  invalidateViaMutation: true,
  unreadLimit: true,
});

/** responseCache.unreadLimit's default (./response-admission). */
export const UNREAD_LIMIT = 32;

/**
 * The longest defaultMaxAge or swr, in seconds: the registry's longest duration (MAX_DURATION,
 * 1e15 ms). A response under a longer one could not be stored: every request would be bypassed
 * (cache_unavailable), the plugin having accepted it.
 */
const MAX_SECONDS = MAX_DURATION / 1000;
const SECONDS = 'an integer number of seconds >= 0 and at most 1e12';

function isSeconds(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= MAX_SECONDS;
}

export interface CheckedResponseOptions {
  readonly sessionId: ResponseCacheOptions['sessionId'];
  readonly vary: ResponseCacheOptions['vary'];
  readonly enabled: ResponseCacheOptions['enabled'];
  readonly maxBytes: number;
  readonly defaultMaxAge: number;
  readonly swr: number | undefined;
  readonly invalidateViaMutation: boolean;
  /** 0: every response stored (see ./response-admission). */
  readonly unreadLimit: number;
}

/** The options with their defaults, or the error that names the first bad one. */
export function checkResponseOptions(options: true | ResponseCacheOptions, owner: string): CheckedResponseOptions {
  const given: ResponseCacheOptions = options === true ? {} : options;
  // An array, a Map, a Date, a RegExp… holds no options: refused naming the option, not accepted as {}.
  if (given === null || typeof given !== 'object' || Object.prototype.toString.call(given) !== '[object Object]')
    throw invalidOption('responseCache', options, 'true or an options object');
  checkKnownKeys(owner, given, OPTIONS, 'responseCache.');
  const {
    sessionId,
    vary,
    enabled,
    maxBytes = 1024 * 1024,
    defaultMaxAge = 0,
    swr,
    invalidateViaMutation = true,
    unreadLimit = UNREAD_LIMIT,
  } = given;
  if (sessionId !== undefined && typeof sessionId !== 'function')
    throw invalidOption('responseCache.sessionId', sessionId, 'a function of the context');
  if (vary !== undefined && typeof vary !== 'function')
    throw invalidOption('responseCache.vary', vary, 'a function of the context');
  if (enabled !== undefined && typeof enabled !== 'function')
    throw invalidOption('responseCache.enabled', enabled, 'a function of the context returning a boolean');
  if (!Number.isSafeInteger(maxBytes) || (maxBytes as number) < 1)
    throw invalidOption('responseCache.maxBytes', maxBytes, 'a positive integer number of bytes');
  if (!isSeconds(defaultMaxAge)) throw invalidOption('responseCache.defaultMaxAge', defaultMaxAge, SECONDS);
  if (swr !== undefined && !isSeconds(swr)) throw invalidOption('responseCache.swr', swr, SECONDS);
  if (typeof invalidateViaMutation !== 'boolean')
    throw invalidOption('responseCache.invalidateViaMutation', invalidateViaMutation, 'a boolean');
  if (unreadLimit !== false && !(Number.isSafeInteger(unreadLimit) && unreadLimit >= 1 && unreadLimit <= 1e9))
    throw invalidOption('responseCache.unreadLimit', unreadLimit, 'false or an integer from 1 to 1e9');
  return {
    sessionId,
    vary,
    enabled,
    maxBytes,
    defaultMaxAge,
    swr,
    invalidateViaMutation,
    unreadLimit: unreadLimit === false ? 0 : unreadLimit,
  };
}

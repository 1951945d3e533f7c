/**
 * The parts of a response key that come from the application's callbacks: the session of a
 * PRIVATE operation (`responseCache.sessionId`) and the request parts that vary the answer
 * (`responseCache.vary`). They run on every cacheable request, after the plugin was created, so a
 * mistake in them cannot be refused up front; and at request time the cache never fails a request.
 * So an answer that cannot be used, or a throw, makes that request `bypassed` (executed without the
 * response cache: `session_failed`, `vary_failed`, or `no_session` for an answer that is no
 * session), and is said once (process.emitWarning, naming the option and what it returned).
 *
 * `vary` answers a string, an iterable (an array) of strings, or null/undefined (no parts). Nothing
 * else is turned into a string: two tenants' objects would both read "[object Object]" and share
 * their answers.
 */
import { describe } from '../core/errors';
import { SESSION_ID_WARNING, sessionFrom } from './session';
import { type OnceWarnings, isThenable } from './warnings';
import type { ResponseCacheOptions } from './response-types';

/** The `process.emitWarning` code of a `responseCache.vary` that threw or answered something unusable. */
export const VARY_WARNING = 'HERDCACHE_VARY';

const SESSION_OPTION = '"responseCache.sessionId"';
const VARY_OPTION = '"responseCache.vary"';

/** The session (undefined: none), or why none could be read. */
export function sessionPart(
  sessionId: NonNullable<ResponseCacheOptions['sessionId']>,
  context: unknown,
  warnings: OnceWarnings,
): string | undefined | 'session_failed' {
  let answer: unknown;
  try {
    answer = sessionId(context);
  } catch (error) {
    warnings.warn(
      'sessionId:throws',
      SESSION_ID_WARNING,
      `herdcache: option ${SESSION_OPTION} threw (${messageOf(error)}): the PRIVATE operations it was asked about are executed without the response cache (bypassReason "session_failed").`,
    );
    return 'session_failed';
  }
  return sessionFrom(answer, SESSION_OPTION, warnings);
}

/** The vary parts (null: none), or 'vary_failed'. */
export function varyPart(
  vary: NonNullable<ResponseCacheOptions['vary']>,
  context: unknown,
  warnings: OnceWarnings,
): string | readonly string[] | null | 'vary_failed' {
  let answer: unknown;
  try {
    answer = vary(context);
    if (answer === undefined || answer === null) return null;
    if (typeof answer === 'string') return answer;
    const parts = stringsOf(answer);
    if (Array.isArray(parts)) return parts;
    if (parts !== undefined) {
      warnings.warn(
        'vary:part',
        VARY_WARNING,
        `herdcache: option ${VARY_OPTION} returned ${describe(answer)} holding ${describe(parts.part)}: every part must be a string. The operations it was asked about are executed without the response cache (bypassReason "vary_failed").`,
      );
      return 'vary_failed';
    }
  } catch (error) {
    // Thrown by vary, or by the iterable it answered.
    warnings.warn(
      'vary:throws',
      VARY_WARNING,
      `herdcache: option ${VARY_OPTION} threw (${messageOf(error)}): the operations it was asked about are executed without the response cache (bypassReason "vary_failed").`,
    );
    return 'vary_failed';
  }
  const what = isThenable(answer)
    ? 'a Promise: it must return its parts synchronously'
    : `${describe(answer)}: it must return a string, an array of strings, or null/undefined`;
  warnings.warn(
    isThenable(answer) ? 'vary:promise' : 'vary:value',
    VARY_WARNING,
    `herdcache: option ${VARY_OPTION} returned ${what}. The operations it was asked about are executed without the response cache (bypassReason "vary_failed").`,
  );
  return 'vary_failed';
}

/** The strings an iterable holds; its first part that is no string; undefined: no iterable. */
function stringsOf(answer: unknown): string[] | { readonly part: unknown } | undefined {
  if (answer === null || typeof answer !== 'object') return undefined;
  if (typeof (answer as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function') return undefined;
  const parts: string[] = [];
  for (const part of answer as Iterable<unknown>) {
    if (typeof part !== 'string') return { part };
    parts.push(part);
  }
  return parts;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : describe(error);
}

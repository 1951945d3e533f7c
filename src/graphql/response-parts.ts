/**
 * The parts of a response key that come from the application's callbacks: the session
 * (`responseCache.sessionId`: a PRIVATE operation's own, whether a PUBLIC one's request is signed
 * in) and the request parts that vary the answer (`responseCache.vary`); and whether the request
 * uses the layer at all (`responseCache.enabled`). They run on every cacheable request, after the
 * plugin was created, so a mistake in them cannot be refused up front; and at request time the
 * cache never fails a request. So an answer that cannot be used, or a throw, makes that request
 * `bypassed` (executed without the response cache: `session_failed`, `vary_failed`), and is said
 * once (process.emitWarning, naming the option and what it returned).
 *
 * `vary` answers a string, an iterable (an array) of strings, or null/undefined (no parts). Nothing
 * else is turned into a string: two tenants' objects would both read "[object Object]" and share
 * their answers.
 */
import { describe } from '../core/errors';
import { SESSION_ID_WARNING, isNoSession, sessionFrom } from './session';
import { type OnceWarnings, ignoreRejection, isThenable } from './warnings';
import type { ResponseCacheOptions } from './response-types';

/** The `process.emitWarning` code of a `responseCache.vary` that threw or answered something unusable. */
export const VARY_WARNING = 'HERDCACHE_VARY';
/** The `process.emitWarning` code of a `responseCache.enabled` that threw or answered no boolean. */
export const ENABLED_WARNING = 'HERDCACHE_ENABLED';

const SESSION_OPTION = '"responseCache.sessionId"';
/** What an unusable sessionId answer does to a request, as its warning says it (see sessionPart). */
const UNUSABLE_SESSION =
  'the operations it is asked about are executed without the response cache (bypassReason "session_failed"): whether the request is signed in is part of their key';
const VARY_OPTION = '"responseCache.vary"';
const ENABLED_OPTION = '"responseCache.enabled"';

/** A callback's answer that cannot be used (the warning said why): a symbol, never a session or a part. */
export const PART_FAILED: unique symbol = Symbol('herdcache.responsePartFailed');

/** The session (undefined: none), or PART_FAILED. Never throws: reading the answer may (a Proxy, a getter). */
export function sessionPart(
  sessionId: NonNullable<ResponseCacheOptions['sessionId']>,
  context: unknown,
  warnings: OnceWarnings,
): string | undefined | typeof PART_FAILED {
  try {
    const answer = sessionId(context);
    const id = sessionFrom(answer, SESSION_OPTION, warnings, UNUSABLE_SESSION);
    // Not known to be signed in or not (a Promise, an object…: a mistake, warned of): its key could
    // be neither a signed-in viewer's nor an anonymous one's, so it is not looked up at all.
    return id === undefined && !isNoSession(answer) ? PART_FAILED : id;
  } catch (error) {
    warnings.warn(
      'sessionId:throws',
      SESSION_ID_WARNING,
      `herdcache: option ${SESSION_OPTION} threw (${messageOf(error)}): the operations it was asked about are executed without the response cache (bypassReason "session_failed").`,
    );
    return PART_FAILED;
  }
}

/** The vary parts (null: none), or PART_FAILED. Never throws (see sessionPart). */
export function varyPart(
  vary: NonNullable<ResponseCacheOptions['vary']>,
  context: unknown,
  warnings: OnceWarnings,
): string | readonly string[] | null | typeof PART_FAILED {
  try {
    const answer = vary(context);
    if (answer === undefined || answer === null) return null;
    if (typeof answer === 'string') return answer;
    const parts = stringsOf(answer);
    if (Array.isArray(parts)) return parts;
    const promise = parts === undefined && isThenable(answer);
    if (promise) ignoreRejection(answer); // an async vary: its rejection observed (else fatal)
    const what =
      parts !== undefined
        ? `${describe(answer)} holding ${describe(parts.part)}: every part must be a string`
        : promise
          ? 'a Promise: it must return its parts synchronously'
          : `${describe(answer)}: it must return a string, an array of strings, or null/undefined`;
    warnings.warn(
      parts !== undefined ? 'vary:part' : promise ? 'vary:promise' : 'vary:value',
      VARY_WARNING,
      `herdcache: option ${VARY_OPTION} returned ${what}. The operations it was asked about are executed without the response cache (bypassReason "vary_failed").`,
    );
    return PART_FAILED;
  } catch (error) {
    // Thrown by vary, by the iterable it answered, or by reading its answer.
    return threw(warnings, VARY_OPTION, VARY_WARNING, error, 'vary_failed');
  }
}

/** What `enabled` answered: true or false, or PART_FAILED (warned of). Never throws (see sessionPart). */
export function enabledPart(
  enabled: NonNullable<ResponseCacheOptions['enabled']>,
  context: unknown,
  warnings: OnceWarnings,
): boolean | typeof PART_FAILED {
  try {
    const answer: unknown = enabled(context);
    if (answer === true || answer === false) return answer;
    const promise = isThenable(answer);
    if (promise) ignoreRejection(answer); // else its rejection would end the process
    warnings.warn(
      promise ? 'enabled:promise' : 'enabled:value',
      ENABLED_WARNING,
      `herdcache: option ${ENABLED_OPTION} returned ${promise ? 'a Promise: it must answer synchronously' : `${describe(answer)}: it must return true or false`}. The operations it was asked about are executed without the response cache (bypassReason "enabled_failed").`,
    );
    return PART_FAILED;
  } catch (error) {
    return threw(warnings, ENABLED_OPTION, ENABLED_WARNING, error, 'enabled_failed');
  }
}

/** Says once that `option` threw: the operations it was asked about are bypassed with `reason`. */
function threw(
  warnings: OnceWarnings,
  option: string,
  code: string,
  error: unknown,
  reason: string,
): typeof PART_FAILED {
  warnings.warn(
    `${option}:throws`,
    code,
    `herdcache: option ${option} threw (${messageOf(error)}): the operations it was asked about are executed without the response cache (bypassReason "${reason}").`,
  );
  return PART_FAILED;
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
  try {
    return error instanceof Error ? String(error.message) : describe(error);
  } catch {
    return 'an error that cannot be read';
  }
}

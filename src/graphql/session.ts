/**
 * A `sessionId` option's answer read as a session (the @cached transform's, the response layer's).
 * A string, a finite number or a bigint is a session, read as its string (42, 42n and "42" are one
 * session); null, undefined, "" or false is none, on purpose
 * (`(ctx) => ctx.signedIn && ctx.userId`). A Promise (an async sessionId, as
 * Apollo's response cache plugin takes one), another object, NaN, ±Infinity, true or a symbol is
 * none too, so nothing PRIVATE is ever keyed by it, but it is a mistake that would only show as
 * PRIVATE data never cached: warned once (HERDCACHE_SESSION_ID), naming the option and what it
 * returned. (The response layer bypasses such a request altogether: ./response-parts.)
 */
import { describe } from '../core/errors';
import { identityString } from './keys';
import { type OnceWarnings, ignoreRejection, isThenable } from './warnings';

/** The @cached transform's option, as its warnings name it (fields and entities alike). */
export const TRANSFORM_SESSION_OPTION = '"sessionId" of cachedDirectiveTransformer()';

/** What an unusable answer of the transform's sessionId does, as its warning says it. */
const TRANSFORM_CONSEQUENCE = 'it counts as no session: PRIVATE fields and entities are resolved without the cache';

/** Whether `value`, a sessionId's answer, says "no session" on purpose (not a mistake: see sessionFrom). */
export function isNoSession(value: unknown): boolean {
  return value === null || value === undefined || value === '' || value === false;
}

/** The `process.emitWarning` code of a sessionId that returned something no session can be (or threw, in the response layer). */
export const SESSION_ID_WARNING = 'HERDCACHE_SESSION_ID';

/**
 * The session `value` (a sessionId's answer) names, or undefined; an answer that cannot be one by
 * mistake is warned of once. `option` names the option as the warning says it, quoted
 * (`"responseCache.sessionId"`, `"sessionId" of cachedDirectiveTransformer()`).
 */
export function sessionFrom(
  value: unknown,
  option: string,
  warnings: OnceWarnings,
  consequence = TRANSFORM_CONSEQUENCE,
): string | undefined {
  const id = identityString(value);
  // No session, said as such: null, undefined, '', false (`ctx.signedIn && ctx.userId`). Anything
  // else unusable (NaN, Infinity, true, a symbol, an object, a Promise) is a mistake, warned of once.
  if (id !== undefined || isNoSession(value)) return id;
  if (isThenable(value)) {
    ignoreRejection(value); // an async sessionId that rejects would otherwise end the process
    warnings.warn(
      `${option}:promise`,
      SESSION_ID_WARNING,
      `herdcache: option ${option} returned a Promise: it must return the session id synchronously (a string or a number; read it from the context, which an async context function can prepare). Until then ${consequence}.`,
    );
  } else {
    warnings.warn(
      `${option}:value`,
      SESSION_ID_WARNING,
      `herdcache: option ${option} returned ${describe(value)}: a session id is a non-empty string, a finite number or a bigint (or null/undefined for none). Until it does, ${consequence}.`,
    );
  }
  return undefined;
}

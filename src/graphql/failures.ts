/**
 * Who receives a shared failure of a @cached field (docs/security.md, "What coalesced callers
 * receive"). Every caller that joins a flight shares its outcome: the value, because a PUBLIC
 * value depends only on its key; but the error was built by the leader's resolver for the
 * leader's request (its user, its authorization: "report 9 refused for alice"), and a request of
 * another session must not read it. PRIVATE keys hold the session, so their flights never mix
 * sessions; for PUBLIC fields (when the transformer knows sessions) the directive records the
 * leader's session on the error, and hands the error itself only to callers of that session.
 */
import { HerdcacheError } from '../core/errors';
import { asError } from '../core/flight';

/** The error a fill of `session` failed with (a thrown non-Error wrapped, as the registry would), recorded. */
export function failedIn(thrown: unknown, session: string | undefined): unknown {
  const error = asError(thrown) as object;
  failedSessions.set(error, session);
  return error;
}

/**
 * Fill failures of PUBLIC fields, with the session of the request whose resolver raised them
 * (undefined: no session). Weak: an error is forgotten with its last holder.
 */
const failedSessions = new WeakMap<object, string | undefined>();

/**
 * What a caller of `session` receives for a shared failure: the error itself when the leader
 * was of the same session (or both had none); otherwise an E_SHARED_FAILURE HerdcacheError with
 * the original as its non-enumerable `cause` (for server logs; graphql-js and Apollo put neither
 * its message nor its extensions in the response). Errors that no resolver of this kind raised
 * (herdcache's own: invalidated, closed…) pass through.
 */
export function sharedFailureFor(error: unknown, coordinate: string, session: string | undefined): unknown {
  if (typeof error !== 'object' || error === null || !failedSessions.has(error)) return error;
  if (failedSessions.get(error) === session) return error;
  return new HerdcacheError(
    'E_SHARED_FAILURE',
    `herdcache: ${coordinate} failed in a computation that another session's request started and this one joined; that error is not shared across sessions`,
    { cause: error },
  );
}

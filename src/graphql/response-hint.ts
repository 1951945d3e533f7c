/**
 * Runtime hints for the response layer, on any server. A resolver that learns while it runs that
 * its answer is more restricted than the schema says (the viewer's own data behind a PUBLIC field,
 * a shorter freshness) tells the operation so. Apollo has `info.cacheControl.setCacheHint`; Yoga
 * and Envelop have nothing of the kind, so herdcache offers `setResponseCacheHint(context, hint)`,
 * honoured by both plugins: a result stricter than the policy its key was made for is neither
 * stored nor shared (the safety rule: its waiters execute themselves), and the Cache-Control
 * header says the stricter policy. A hint only restricts: the smaller maxAge wins, PRIVATE sticks.
 */
import { invalidArgument, invalidOption } from '../core/errors';
import { checkKnownKeys, optionNames } from '../core/options';

export interface ResponseCacheHint {
  /** Seconds at most (an integer >= 0; 0: not cacheable). */
  readonly maxAge?: number;
  /** PRIVATE: the answer is the viewer's own. PUBLIC says nothing (a hint never loosens). */
  readonly scope?: 'PUBLIC' | 'PRIVATE';
}

/** A policy as a hint restricts it: either part may be unsaid. */
export interface PolicyHint {
  readonly maxAge?: number | undefined;
  readonly scope?: 'PUBLIC' | 'PRIVATE' | undefined;
}

const HINT_OPTIONS = optionNames<ResponseCacheHint>({ maxAge: true, scope: true });

/** Hints by operation context (the object resolvers get as their third argument). */
const hints = new WeakMap<object, PolicyHint>();

/**
 * Restricts the response policy of the operation whose context this is (call it from a resolver,
 * with the resolver's context): see the module comment. It keeps this response from being stored
 * or shared; it does not change the key, made before execution: a request of a PUBLIC operation
 * may still be given a stored answer. Per-viewer answers need the key to tell them apart (a static
 * PRIVATE hint with sessionId, or vary): docs/response-cache.md, Runtime hints.
 */
export function setResponseCacheHint(context: object, hint: ResponseCacheHint): void {
  if (context === null || typeof context !== 'object')
    throw invalidArgument('context', context, "the operation's context object");
  if (hint === null || typeof hint !== 'object') throw invalidArgument('hint', hint, 'an object');
  checkKnownKeys('setResponseCacheHint()', hint, HINT_OPTIONS);
  const { maxAge, scope } = hint;
  if (maxAge !== undefined && (!Number.isSafeInteger(maxAge) || maxAge < 0))
    throw invalidOption('maxAge', maxAge, 'an integer number of seconds >= 0');
  if (scope !== undefined && scope !== 'PUBLIC' && scope !== 'PRIVATE')
    throw invalidOption('scope', scope, "'PUBLIC' or 'PRIVATE'");
  hints.set(context, restrictPolicy(hints.get(context) ?? {}, hint));
}

/** The hint set on this context, if any. */
export function responseCacheHintOf(context: unknown): PolicyHint | undefined {
  return context !== null && typeof context === 'object' ? hints.get(context) : undefined;
}

/** `policy` restricted by `hint`: the smaller maxAge, PRIVATE if either is. */
export function restrictPolicy<P extends PolicyHint>(policy: P, hint: PolicyHint): P {
  const maxAge =
    hint.maxAge === undefined
      ? policy.maxAge
      : policy.maxAge === undefined
        ? hint.maxAge
        : Math.min(policy.maxAge, hint.maxAge);
  const scope = hint.scope === 'PRIVATE' ? 'PRIVATE' : policy.scope;
  return { ...policy, maxAge, scope };
}

/**
 * `responseCache.defaultMaxAge` on Apollo Server needs Apollo's cache-control plugin to have the
 * same `defaultMaxAge`. Apollo installs that plugin itself when none is in `plugins`, with
 * defaultMaxAge 0: a field without a hint then makes Apollo's policy maxAge 0, and the response
 * layer, which reads Apollo's final policy as the resolvers' runtime hints, sees a result stricter
 * than its key was made for (`stricter_hint`): never stored, every request a miss.
 *
 * It cannot be told apart from a real runtime hint after the fact: Apollo's policy is the smallest
 * of its fields', so a resolver's `setCacheHint({ maxAge: 5 })` is hidden under a defaulted field's
 * 0. Reading such a result as cacheable could store it for longer than a resolver allowed; so it is
 * not stored, and the likely cause is said once (HERDCACHE_APOLLO_DEFAULT_MAX_AGE): the operation's
 * policy depends on defaultMaxAge (with 0 it would be shorter or none), and Apollo's is shorter.
 */
import type { ResponseEngine } from '../graphql/response-cache';
import type { PolicyHint } from '../graphql/response-hint';
import { operationPolicy } from '../graphql/response-policy';
import type { ResponsePlan } from '../graphql/response-types';

/** The `process.emitWarning` code of Apollo's cache-control defaultMaxAge below `responseCache.defaultMaxAge`. */
export const APOLLO_DEFAULT_MAX_AGE_WARNING = 'HERDCACHE_APOLLO_DEFAULT_MAX_AGE';

/**
 * Warns once (per plugin) when a result not stored as `stricter_hint` is, most likely, Apollo's
 * default at work rather than a resolver's hint. `apolloMaxAge`: Apollo's final overallCachePolicy
 * maxAge; `hint`: herdcache's own runtime hint (setResponseCacheHint), which explains it when as short.
 */
export function warnIfApolloDefault(
  engine: ResponseEngine,
  plan: ResponsePlan,
  apolloMaxAge: number | undefined,
  hint: PolicyHint | undefined,
): void {
  const ours = plan.policy.maxAge;
  if (engine.defaultMaxAge === 0 || apolloMaxAge === undefined || apolloMaxAge >= ours) return;
  if (hint?.maxAge !== undefined && hint.maxAge <= apolloMaxAge) return;
  const { schema, document, operationName } = plan.request;
  const withoutDefault = operationPolicy(schema, document, operationName, 0);
  if (typeof withoutDefault !== 'string' && withoutDefault.maxAge >= ours) return; // the default plays no part
  const n = engine.defaultMaxAge;
  engine.warnings.warn(
    APOLLO_DEFAULT_MAX_AGE_WARNING,
    APOLLO_DEFAULT_MAX_AGE_WARNING,
    `herdcache: option "responseCache.defaultMaxAge" is ${n}, but Apollo's cache-control gave ${operationName ? `operation ${JSON.stringify(operationName)}` : 'an operation'} maxAge ${apolloMaxAge} where herdcache's policy says ${ours}. Apollo applies its own defaultMaxAge (0 unless its cache-control plugin is given one) to fields without a hint, and the response layer reads Apollo's policy as a resolver's stricter hint: responses that rely on defaultMaxAge are never stored (notStoredReason "stricter_hint"). Add ApolloServerPluginCacheControl({ defaultMaxAge: ${n} }) (from @apollo/server/plugin/cacheControl) to the server's plugins. (If a resolver's setCacheHint lowered the maxAge on purpose, ignore this.)`,
  );
}

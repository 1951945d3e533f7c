/**
 * herdcache for GraphQL: the @cached directive, the per-operation context helper and the report
 * the Apollo plugin puts in `response.extensions.cache`. Loads graphql (its peer) for the directives'
 * GraphQLDirective objects only (./code-first); every other module imports its types only.
 */
export { cachedDirectiveTypeDefs } from './sdl';
export { CacheScopeEnum, cachedDirective, herdcacheDirectives, invalidatesDirective } from './code-first';
export { cachedDirectiveTransformer, type CacheScope, type CachedDirectiveOptions } from './directive';
export { DEFAULT_KEY_PREFIX, cachedFieldKey, canonicalArgs, type CachedFieldKeyOptions } from './keys';
export {
  cacheReport,
  herdcacheContext,
  requestScope,
  type BypassReason,
  type CacheReport,
  type CacheReportCounters,
  type HerdcacheContext,
  type HerdcacheContextOptions,
  type OperationCache,
  type ScopedLoaders,
} from './request';
export type { NotStoredReason, ResponseBypassReason, ResponseCacheOptions, ResponseOutcome } from './response-cache';
export { setResponseCacheHint, type ResponseCacheHint } from './response-hint';

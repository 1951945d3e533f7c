/**
 * The @cached directive's SDL as a string: the same bytes as schema/cached.graphql (a test holds
 * them equal). It is embedded because the build bundles src/ only. Add it to your type definitions.
 */
export const cachedDirectiveTypeDefs = `"""
Caches the field's value in herdcache: however many requests miss at once, the
resolver runs once per key. \`ttl\` and \`swr\` are in seconds, as in @cacheControl(maxAge:).
"""
directive @cached(
  "Seconds the value stays fresh: a positive integer."
  ttl: Int!
  "Seconds after \`ttl\` during which the stale value is served while one refresh runs. Default 0."
  swr: Int
  "PUBLIC: one value for everyone. PRIVATE: one value per session; not cached without a session."
  scope: CacheScope = PUBLIC
) on FIELD_DEFINITION

"Who shares a @cached value."
enum CacheScope {
  "Shared by every request: the value must not depend on the viewer."
  PUBLIC
  "Keyed by the session id (the sessionId option): never served to another session."
  PRIVATE
}
`;

/**
 * The SDL of @cached, enum CacheScope and @invalidates as a string: the same bytes as
 * schema/cached.graphql (a test holds them equal). It is embedded because the build bundles src/
 * only. Add it to your type definitions.
 */
export const cachedDirectiveTypeDefs = `"""
Caches the field's value in herdcache: however many requests miss at once, the
resolver runs once per key. \`ttl\` and \`swr\` are in seconds, as in @cacheControl(maxAge:).
On a Federation entity type (@key): caches its reference resolution per entity key.
"""
directive @cached(
  "Seconds the value stays fresh: a positive integer."
  ttl: Int!
  "Seconds after \`ttl\` during which the stale value is served while one refresh runs. Default 0."
  swr: Int
  "PUBLIC: one value for everyone. PRIVATE: one value per session; not cached without a session."
  scope: CacheScope = PUBLIC
  """
  Tags of the value, as templates filled per call: {id} or {parent.name} from the parent object,
  {args.name} from the arguments (dotted paths allowed), e.g. "User:{id}". Invalidating one of
  them (@invalidates, cache.invalidateTags) makes the value a miss. A call whose placeholder has
  no value is resolved without the cache.
  """
  tags: [String!]
) on FIELD_DEFINITION | OBJECT

"Who shares a @cached value."
enum CacheScope {
  "Shared by every request: the value must not depend on the viewer."
  PUBLIC
  "Keyed by the session id (the sessionId option): never served to another session."
  PRIVATE
}

"""
On a Mutation field: once its resolver has succeeded, and before its result is returned, every
value tagged with one of \`tags\` becomes a miss, on every replica. Nothing is invalidated when the
resolver fails.
"""
directive @invalidates(
  "Tag templates: {args.name} from the arguments, {result} or {result.name} from what the resolver returned."
  tags: [String!]!
) on FIELD_DEFINITION
`;

/**
 * Values whose tags are known only once they are computed: a whole GraphQL response is tagged
 * with the entities it turned out to contain. A fill returns `new LateTagged(value, tags)`; the
 * registry serves `value` and stores it with `tags`.
 *
 * The race tags exist to win (an invalidation landing while the value is computed) is won
 * differently than for tags known before the fill, whose versions are read before it:
 * - in this process (and on a store that hears other replicas' invalidations), a flight of a
 *   late-tagged policy is abandoned by ANY tag invalidation while it runs: its result is not
 *   written and its waiters start over. Conservative, never stale.
 * - on a tag-versioned store, the late tags' versions are read when the fill ends. An
 *   invalidation made by another replica during the fill, which this process does not hear of,
 *   is therefore not seen: the window is one fill long (documented in docs/response-cache.md).
 *
 * Internal: the response layer (herdcache/graphql) is its one user.
 */
export class LateTagged<V = unknown> {
  constructor(
    readonly value: V,
    readonly tags: readonly string[],
    /** The fill vouches that `tags` holds each tag once: the registry does not dedupe them again. */
    readonly distinct = false,
  ) {}
}

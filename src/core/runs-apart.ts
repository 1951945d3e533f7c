/**
 * Executions a cache's integrations run apart from its flights (the response layer's solo runs:
 * src/graphql/response-solo), counted in `cache.inFlight` and so in the fills-in-flight gauge: a
 * run that never ends shows there as a stuck fill would. Kept beside the cache, not in it: a
 * counter field on Cache (or on its flight table) slowed the hit path (docs/operations.md), and
 * nothing on a hit reads this.
 */
/** By cache (an object here: this module is below cache.ts). */
const APART = new WeakMap<object, { readonly size: number }>();

/** `runs` are executions of `cache`'s in progress apart from its flights, as many as their `size`. */
export function countRunsApart(cache: object, runs: { readonly size: number }): void {
  APART.set(cache, runs);
}

/** How many executions of `cache`'s run apart from its flights now. */
export function runsApart(cache: object): number {
  return APART.get(cache)?.size ?? 0;
}

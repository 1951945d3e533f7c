/**
 * Executions a cache's integrations run apart from its flights (the response layer's solo runs:
 * src/graphql/response-solo), counted in `cache.inFlight` and so in the fills-in-flight gauge: a
 * run that never ends shows there as a stuck fill would. Kept beside the cache, not in it: a
 * counter field on Cache (or on its flight table) slowed the hit path (docs/operations.md), and
 * nothing on a hit reads this.
 */
/** What keeps a cache's runs apart: as many in progress as its `size`. */
interface RunsApart {
  readonly size: number;
}

/** By cache (an object here: this module is below cache.ts). */
const APART = new WeakMap<object, RunsApart>();

/** `cache`'s runs apart, made by `make` at the first call (one kind per process: the response layer's). */
export function runsApartOf<R extends RunsApart>(cache: object, make: () => R): R {
  let runs = APART.get(cache) as R | undefined;
  if (runs === undefined) APART.set(cache, (runs = make()));
  return runs;
}

/** How many executions of `cache`'s run apart from its flights now. */
export function runsApart(cache: object): number {
  return APART.get(cache)?.size ?? 0;
}

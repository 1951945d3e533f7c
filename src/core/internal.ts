/**
 * @internal The core's interface for herdcache's own integrations (src/graphql, src/apollo,
 * src/envelop): everything they may do with a Cache or a RequestScope beyond the public API, in one
 * place, as functions. Integrations import these, never the `_`-members or the core's sentinels,
 * so the core's classes can change shape behind this file. Not exported from any entry point.
 */
import type { Cache } from './cache';
import type { MemoKey } from './memo';
import { NO_ARG, type Computation } from './registry';
import { NO_ANSWER, type RequestScope } from './scope';
import type { GetOrComputeOptions } from './types';
import { RunBatchContext } from './fill-call';
import { type LateTagged, freshPolicy } from './late-tags';
import { makeEntry, physicalTtl } from './freshness';
import { boundedKey } from './long-keys';

export { MemoKey } from './memo';
export { flightsStarted } from './flight';
export { runsApartOf } from './runs-apart';

/** Whether a load of `scope` joined a flight started `seq`-th or before (RequestScope._joinedBefore). */
export function joinedBefore(scope: RequestScope, seq: number): boolean {
  return scope._joinedBefore(seq);
}
/** How many of `scope`'s loads were served stale so far (RequestScope._total). */
export function servedStale(scope: RequestScope): number {
  return scope._total('staleServed');
}
export type { Computation } from './registry';

/** What answerNow returns when the answer needs a load (then call answerLater). */
export const LATER: typeof NO_ANSWER = NO_ANSWER;

/** getOrCompute's options resolved and validated once (per @cached field, at build time). */
export function computationOf(cache: Cache, options: Omit<GetOrComputeOptions, 'signal'> | undefined): Computation {
  return cache._computation(options);
}

/** Throws E_UNSUPPORTED naming `option` unless the cache's store can invalidate tags. */
export function checkTagsSupported(cache: Cache, option: string): void {
  cache._checkTagsSupported(option);
}

/** Whether the fill given `context` (its first argument) was abandoned: invalidated, cleared, left by all. */
export function fillAbandoned(context: unknown): boolean {
  return RunBatchContext.abandoned(context);
}

/**
 * Whether a tag of `tags` (any, with `anyTag`: the value's tags are not all known) was invalidated
 * while the late-tagged fill given `context` ran; its flight is then abandoned (core/late-tags).
 */
export function invalidatedLate(context: unknown, tags: readonly string[], anyTag: boolean): boolean {
  return RunBatchContext.invalidatedLate(context, tags, anyTag);
}

/** How many callers wait on the late-tagged fill given `context` (its starter included; undefined: not known). */
export function fillCallers(context: unknown): number | undefined {
  return RunBatchContext.callers(context);
}

/** The registry clock's time. */
export function nowOf(cache: Cache): number {
  return cache._now();
}

/**
 * A keyed call's answer without a load: the request's earlier answer for the key, or the value of
 * a fresh entry held in process (counted as a hit, and remembered by the request); LATER otherwise.
 * `memoKey`: the key as a MemoKey when the caller keeps one per key (it is then `key`).
 */
export function answerNow(
  cache: Cache,
  scope: RequestScope | undefined,
  call: Computation,
  key: string,
  memoKey: MemoKey | undefined,
): unknown {
  if (scope !== undefined) return memoKey === undefined ? scope._read(call, key) : scope._readKey(call, memoKey);
  const entry = cache._peek(call.source, key, NO_ARG, call.policy, undefined, memoKey);
  return entry === undefined ? LATER : entry.value;
}

/** The keyed call's load, after answerNow said LATER: memoized for the request when there is one. */
export function answerLater(
  cache: Cache,
  scope: RequestScope | undefined,
  call: Computation,
  key: string,
  fill: () => Promise<unknown>,
): Promise<unknown> {
  return scope !== undefined
    ? scope._compute(call, key, fill)
    : cache._load(call.source, key, fill, call.policy, undefined, undefined);
}

/** Whether `key` may run solo: nothing of it held, a store that fills in the step, no hook (graphql/response-solo). */
export function soloFree(cache: Cache, key: string): boolean {
  return cache._soloFree(key);
}

/** Counts on `computation`'s source what a solo run's flight would have counted (and tells the hooks). */
export function soloCount(
  cache: Cache,
  computation: Computation,
  counter: 'misses' | 'coalesced' | 'fills',
  key: string,
  durationMs = 0,
): void {
  cache._soloCount(computation.source, counter, key, durationMs);
}

/** Invalidations (keys, tags, clears) the cache applied so far in this process. */
export function invalidationsOf(cache: Cache): number {
  return cache._invalidations();
}

/**
 * Writes a solo run's result (graphql/response-solo) as the fill step writes a LateTagged value on a
 * store without tag versions: its tags once each, fresh for `freshMs` when shorter than the ttl.
 * False: larger than the store keeps, not written.
 */
export function soloWrite(
  cache: Cache,
  computation: Computation,
  key: string,
  result: LateTagged,
  since: number,
): boolean {
  const policy = freshPolicy(computation.policy, result.freshMs);
  const tags = result.distinct ? result.tags : [...new Set(result.tags)];
  const now = cache._now();
  const entry = makeEntry(result.value, now, policy, { tags, valueBytes: result.valueBytes });
  return cache._soloWrite(computation.source, { key: boundedKey(key), entry, ttl: physicalTtl(entry, now), since });
}

/**
 * What a response execution hands the requests waiting on it (./response-cache, ./response-solo):
 * the response to share, or an answer telling them to execute themselves.
 */
import { LateTagged } from '../core/late-tags';
import { invalidatedLate } from '../core/internal';
import type { NotStoredReason, StoredResponse } from './response-types';

/**
 * What an execution whose result cannot be shared hands to the requests waiting on it (never
 * stored: it is served only): they execute themselves, and report `not_shared`.
 */
export const UNSHAREABLE: unique symbol = Symbol('herdcache.unshareable');
/** UNSHAREABLE for a result a runtime hint made stricter than its key (`stricter_hint`). */
export const STRICTER: unique symbol = Symbol('herdcache.stricter');
/** Why an execution's waiters execute themselves. */
export type Unshared = typeof UNSHAREABLE | typeof STRICTER;

/** What a lookup reads from the registry: a response, or that the execution it waited for had none to share. */
export type Answer = StoredResponse | typeof UNSHAREABLE | typeof STRICTER;

/** Why a result is not handed to the requests that waited on it, as what they are handed. */
export function unshared(reason: NotStoredReason): Answer {
  return reason === 'stricter_hint' ? STRICTER : UNSHAREABLE;
}

/** What an execution hands to the registry. */
export type Shared = LateTagged<Answer>;

/** What the store step hands the waiters instead of a result refused as invalidated elsewhere. */
export const IF_INVALIDATED = { value: UNSHAREABLE } as const;
const NO_TAGS: readonly string[] = [];

/**
 * What the fill given `run` hands its waiters: the result to store, or (none to store) an answer
 * telling them to execute themselves. Its flight is abandoned first when a tag of it (any, for a
 * result served only without tags: untagged, unshareable) was invalidated while it ran
 * (core/late-tags): its waiters start over, nothing is written, as if the invalidation had come a
 * moment before it ended.
 */
export function toShared(run: unknown, stored: LateTagged<StoredResponse> | NotStoredReason): Shared {
  const shared = typeof stored === 'string' ? LateTagged.served<Answer>(unshared(stored)) : stored;
  // Not admitted (./response-admission): nobody waited on it, and one joining now contends again:
  // no invalidation while it ran need abandon it.
  if (stored === 'not_admitted') shared.unfenced = true;
  const anyTag = shared.servedOnly && shared.tags.length === 0 && !shared.unfenced;
  invalidatedLate(run, anyTag ? NO_TAGS : shared.tags, anyTag);
  return shared;
}

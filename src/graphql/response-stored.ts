/**
 * What the response layer stores of an executed result (./response-cache), or why it stores none:
 * errors, a runtime hint stricter than the key's policy, a field read through an older fill, a
 * result too large (shared with its waiters, not stored), an entity whose type could not be told
 * (shared, not stored: an invalidation of it would miss the copy). One walk of the result
 * (./response-result) finds its entities, bounds its size and makes the stored copy.
 */
import { LateTagged } from '../core/late-tags';
import { joinedBefore, servedStale } from '../core/internal';
import { SIZE_SLOT, valueSize } from '../core/sizes';
import type { OperationCache } from './request';
import type { Admits } from './response-admission';
import { resultFacts } from './response-result';
import type { ExecutedResult, FinalPolicy, NotStoredReason, ResponsePlan, StoredResponse } from './response-types';

const INCREMENTAL: unique symbol = Symbol('incremental delivery');

/** What a plugin hands to complete() for an incrementally delivered result (never stored). */
export const INCREMENTAL_RESULT: ExecutedResult = { errors: [INCREMENTAL] };

const UNSERIALIZABLE: unique symbol = Symbol('unserializable');

/** `data` as JSON reads it, in objects of its own (UNSERIALIZABLE: JSON refuses it); `json`: its JSON, when made. */
function jsonCopy(data: unknown, json: string | undefined): unknown {
  try {
    return JSON.parse(json ?? JSON.stringify(data)) as unknown;
  } catch {
    return UNSERIALIZABLE;
  }
}

/** Why a result served only was not stored (see Response.notStored). */
export function servedOnlyReason(stored: LateTagged<StoredResponse>): 'untagged' | 'oversized' {
  return stored.value instanceof ServedResponse ? stored.value.notStored : 'oversized';
}

/**
 * The longest a response stays fresh (seconds) when a @cached field it read was served stale: see
 * toStored. Its Cache-Control max-age on a hit is as short.
 */
export const STALE_FIELDS_MAX_AGE = 1;

/** Whether the execution read a @cached field served stale (its swr grace): stored fresh for STALE_FIELDS_MAX_AGE only. */
export function readStaleFields(operation: OperationCache | undefined): boolean {
  return operation !== undefined && servedStale(operation.scope) > 0;
}

/**
 * A response to store or to share: a class, not an object literal. V8 decides per object literal
 * in the code (its allocation site) whether to allocate it straight in the old generation, from
 * how many of the literal's objects survived a young collection. A literal that made both stored
 * responses (kept) and shared-only ones (their data the request's own result, gone when it ends)
 * could be tenured: each request's result then hung from the old generation, copied by every young
 * collection until a full one (the engine alone, nothing stored: 2 of 8 runs promoted ~210 MB
 * against ~25 MB; with the class, 0 of 8). Class instances get no such decision.
 */
class Response implements StoredResponse {
  constructor(
    readonly data: unknown,
    readonly maxAge: number,
    readonly scope: StoredResponse['scope'],
    readonly at: number,
  ) {}
}

/**
 * A result served to the requests waiting on it, not stored, and why: too large, or an entity in it
 * could not be tagged (ResultFacts.untagged). Never stored, so the reason can ride along.
 */
class ServedResponse extends Response {
  constructor(
    data: unknown,
    maxAge: number,
    scope: StoredResponse['scope'],
    at: number,
    readonly notStored: 'untagged' | 'oversized',
  ) {
    super(data, maxAge, scope, at);
  }
}

/** A stored response's wrapper by the store's rules, without its data (the same for every response of a scope). */
const WRAPPER_SIZES: Readonly<Record<StoredResponse['scope'], number>> = {
  PUBLIC: valueSize({ data: null, maxAge: 0, scope: 'PUBLIC', at: 0 }) - SIZE_SLOT,
  PRIVATE: valueSize({ data: null, maxAge: 0, scope: 'PRIVATE', at: 0 }) - SIZE_SLOT,
};

/**
 * What to store of `executed` (a LateTagged, maybe served only), or why nothing. `startSeq`: see
 * older_fill. `admission`: given for a miss no other request waits on, which may be left unstored
 * (not walked nor written) when its operation's responses are not read (./response-admission).
 */
export function toStored(
  plan: ResponsePlan,
  executed: ExecutedResult,
  final: FinalPolicy | undefined,
  operation: OperationCache | undefined,
  startSeq: number,
  maxBytes: number,
  now: () => number,
  admission: Admits | undefined,
): LateTagged<StoredResponse> | NotStoredReason {
  if (executed.errors !== undefined && executed.errors.length > 0)
    return executed.errors[0] === INCREMENTAL ? 'incremental' : 'errors';
  if (executed.data === null || executed.data === undefined) return 'errors';
  // A @cached field or loader key answered by a fill in flight since before this execution (a
  // concurrent operation's): its value may predate an invalidation after this execution's tag
  // clock reading, which fences only what ran after it. Served to the waiters, not stored.
  if (operation !== undefined && joinedBefore(operation.scope, startSeq)) return 'older_fill';
  const { policy } = plan;
  // The freshness the result allows: the key's, or a runtime hint's shorter one (a resolver's
  // setCacheHint, a gateway's subgraph answering a shorter max-age), stored for that long, as
  // Apollo's response cache stores it: a request waiting on it could have been given it from
  // the cache. A runtime maxAge of 0, or PRIVATE under a PUBLIC key: neither stored nor shared.
  let maxAge = policy.maxAge;
  if (final !== undefined) {
    if (final.scope === 'PRIVATE' && policy.scope !== 'PRIVATE') return 'stricter_hint';
    if (final.maxAge !== undefined && final.maxAge < maxAge) {
      if (!(final.maxAge >= 1)) return 'stricter_hint';
      maxAge = Math.floor(final.maxAge);
    }
  }
  // Not walked nor shared: the executing request has its own result, and one joining now is
  // handed nothing to share (it contends again). A result that read a @cached field served stale
  // goes on: stored for a second (stale_fields).
  const staleFields = readStaleFields(operation);
  if (admission !== undefined && !staleFields && !admission.admits(plan.policy, plan.key)) return 'not_admitted';
  const { request } = plan;
  const seen = operation?.tagsSeen;
  // One walk finds the entities and bounds the JSON's size: only a result that may be over
  // maxBytes is serialized (a second time: the server serializes what it sends) to know.
  const facts = resultFacts(request.schema, request.document, request.operationName, executed.data, true);
  if (facts === undefined) return 'unserializable';
  // The JSON when it was made (to know the size): a copy through JSON parses it, not made again.
  let json: string | undefined;
  if (!facts.bounded || facts.maxBytes > maxBytes) {
    let size: number;
    try {
      json = JSON.stringify(executed.data);
      size = Buffer.byteLength(json);
    } catch {
      return 'unserializable';
    }
    // Too large to store, fine to share: the requests waiting on it are answered with it (its tags
    // kept, when complete: an invalidation of one elsewhere while it ran makes them execute again).
    if (size > maxBytes) {
      const tags = facts.untagged ? [] : seen === undefined ? facts.tags : [...facts.tags, ...seen];
      // A copy: a plugin after this one may change its own request's data in place.
      const data = facts.compact ?? jsonCopy(executed.data, json);
      if (data === UNSERIALIZABLE) return 'unserializable';
      const served = new ServedResponse(data, policy.maxAge, policy.scope, now(), 'oversized');
      return LateTagged.served<StoredResponse>(served, tags);
    }
  }
  // What is stored or shared is never the executing request's own object (a plugin after this one
  // may change its response in place): the walk's copy, or where it made none (a response key
  // selected twice, another executor's objects) a JSON copy.
  const data = facts.compact ?? jsonCopy(executed.data, json);
  if (data === UNSERIALIZABLE) return 'unserializable';
  // An entity whose type could not be told (no __typename): an invalidation of it would miss the
  // stored copy. Shared with the requests waiting on it (any invalidation while it ran abandons it), not stored.
  if (facts.untagged) {
    return LateTagged.served<StoredResponse>(new ServedResponse(data, maxAge, policy.scope, now(), 'untagged'));
  }
  // Each entity once (facts.distinct); the fields' tags may repeat them: then the registry dedupes.
  const tags = facts.tags;
  const distinct = facts.distinct && (seen === undefined || seen.size === 0);
  if (seen !== undefined) for (const tag of seen) tags.push(tag);
  // A @cached field was served stale (its swr grace) while this ran: stored for its maxAge, the
  // response would pass that stale value off as fresh (a response's refresh would, each time its
  // fields expire with it). Not stored at all, every request would execute it again while the
  // field stays stale (its backend down: each execution asks it again). So it is stored fresh for
  // STALE_FIELDS_MAX_AGE only (its grace kept, its header max-age as short): one execution a
  // second at most, and the field's refreshed value in the response within a second of landing.
  if (staleFields) maxAge = Math.min(maxAge, STALE_FIELDS_MAX_AGE);
  const stored = new Response(data, maxAge, policy.scope, now());
  // The store's size estimate, from the walk above: the wrapper by the store's own rules, its
  // data (counted there as the null that stands for it) as measured.
  const bytes = facts.bounded ? WRAPPER_SIZES[policy.scope] + facts.heapBytes : undefined;
  const tagged = new LateTagged<StoredResponse>(stored, tags, distinct, bytes);
  if (maxAge < policy.maxAge) tagged.freshMs = maxAge * 1000;
  return tagged;
}

/**
 * One keyed call of a @cached field or entity reference, answered through the registry: through the
 * operation's request scope when the context has one (so the call is counted in the operation's
 * report and memoized for it), else through the cache directly. Shared by ./directive (fields) and
 * ./entities (Federation's __resolveReference).
 */
import type { GraphQLFieldResolver, GraphQLResolveInfo } from 'graphql';
import type { Cache } from '../core/cache';
import { LATER, type Computation, type MemoKey, answerLater, answerNow } from '../core/internal';
import { failedIn } from './failures';
import { operationOf } from './request';
import { settleValue } from './settle';

/** `memoKey`: the key as a MemoKey when the caller keeps one per key (a field's calls without arguments). */
export function answerKeyed(
  cache: Cache,
  call: Computation,
  key: string,
  context: unknown,
  fill: () => Promise<unknown>,
  memoKey?: MemoKey,
): unknown {
  const operation = operationOf(context);
  const scope = operation === undefined ? undefined : operation.cache === cache ? operation.scope : otherCache(cache);
  // A fresh value held in process is returned as it is, not in a promise: graphql-js then
  // completes the field synchronously, as it does a plain resolver's.
  const answer = answerNow(cache, scope, call, key, memoKey);
  if (answer !== LATER) return answer;
  // Misses of one tick (the siblings of a list, the representations of one _entities call) leave
  // in one store read: the registry batches them.
  return answerLater(cache, scope, call, key, fill);
}

/**
 * answerKeyed for a @cached field's call, whose fill (its resolver, settled) is made only when the
 * answer needs a load: a closure made by the caller would have every call, hits too, allocate it
 * and a context for the call's arguments. `sessionOf`: the field's callers have sessions, and a
 * failure carries the session of the caller whose resolver failed (./failures). `list`: the field's
 * type is a list, whose items may fail one by one (see settleList: the caller answers a PartialList
 * with listOrThrow).
 */
export function answerField(
  cache: Cache,
  call: Computation,
  key: string,
  memoKey: MemoKey | undefined,
  resolve: GraphQLFieldResolver<unknown, unknown>,
  parent: unknown,
  args: Record<string, unknown>,
  context: unknown,
  info: GraphQLResolveInfo,
  sessionOf: ((context: unknown) => string | undefined) | undefined,
  list: boolean,
): unknown {
  const operation = operationOf(context);
  const scope = operation === undefined ? undefined : operation.cache === cache ? operation.scope : otherCache(cache);
  const answer = answerNow(cache, scope, call, key, memoKey);
  if (answer !== LATER) return answer;
  return answerLater(cache, scope, call, key, fillOf(resolve, parent, args, context, info, sessionOf, list));
}

/**
 * The call's fill. A function apart: a closure over the call's arguments in answerField would make
 * its every call allocate their context, on entry, hits included.
 */
function fillOf(
  resolve: GraphQLFieldResolver<unknown, unknown>,
  parent: unknown,
  args: Record<string, unknown>,
  context: unknown,
  info: GraphQLResolveInfo,
  sessionOf: ((context: unknown) => string | undefined) | undefined,
  list: boolean,
): () => Promise<unknown> {
  if (sessionOf === undefined) return () => settleValue(resolve(parent, args, context, info), list);
  return async () => {
    try {
      return await settleValue(resolve(parent, args, context, info), list);
    } catch (thrown) {
      throw failedIn(thrown, sessionOf(context));
    }
  };
}

/** Transforms' caches already warned of (once each): see otherCache. */
const warnedOtherCache = new WeakSet<Cache>();

/**
 * A @cached field of a transform given another cache than the operation's (the plugin's, the
 * context's): it is cached in its own, but the operation's report counts nothing for it. Said once
 * per transform cache (HERDCACHE_OTHER_CACHE): otherwise it only shows as reports of zeros.
 */
function otherCache(cache: Cache): undefined {
  if (!warnedOtherCache.has(cache)) {
    warnedOtherCache.add(cache);
    process.emitWarning(
      "herdcache: a @cached field was resolved with another cache than the operation's: cachedDirectiveTransformer(schema, { cache }) was given a different cache than herdcachePlugin / useHerdcache / herdcacheContext. The field is cached in the transform's cache, but extensions.cache and the metrics count nothing for it. Give them the same cache.",
      { code: 'HERDCACHE_OTHER_CACHE' },
    );
  }
  return undefined;
}

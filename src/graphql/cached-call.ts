/**
 * One keyed call of a @cached field or entity reference, answered through the registry: through the
 * operation's request scope when the context has one (so the call is counted in the operation's
 * report and memoized for it), else through the cache directly. Shared by ./directive (fields) and
 * ./entities (Federation's __resolveReference).
 */
import type { GraphQLFieldResolver, GraphQLResolveInfo } from 'graphql';
import type { Cache } from '../core/cache';
import { LATER, type Computation, type MemoKey, answerLater, answerNow } from '../core/internal';
import { describe, isError } from '../core/errors';
import { failedIn } from './failures';
import { operationOf } from './request';
import { isThenable } from './warnings';

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
  if (sessionOf === undefined) return () => settleList(resolve(parent, args, context, info), list);
  return async () => {
    try {
      return await settleList(resolve(parent, args, context, info), list);
    } catch (thrown) {
      throw failedIn(thrown, sessionOf(context));
    }
  };
}

/**
 * A resolver may return a list of promises (`ids.map((id) => loader.load(id))`); graphql-js
 * accepts that, but a cache must hold values, not promises (a rejected one would be served on
 * every hit), so the list is awaited. A *returned* Error is an error to graphql-js too: it is
 * thrown, never cached. `partial` (a field's list): a list whose items did not all resolve (a
 * rejected promise, an Error item) is not cached either, and is answered as graphql-js answers it
 * without a cache, item by item (its other items kept, each failed one an error at its own path):
 * thrown as a PartialList, which listOrThrow turns back into the list. Without `partial` (an
 * entity reference), the first failed item fails the call.
 */
export async function settleList(result: unknown, partial = false): Promise<unknown> {
  const value = await result;
  if (isError(value)) throw value;
  if (!Array.isArray(value)) return value;
  if (!partial) {
    const items = value.some(isThenable) ? await Promise.all(value) : value;
    const failed = items.find(isError);
    if (failed !== undefined) throw failed;
    return items;
  }
  const items: unknown[] = value.some(isThenable)
    ? (await Promise.allSettled(value)).map((item) =>
        item.status === 'fulfilled' ? item.value : asItemError(item.reason),
      )
    : value;
  return items.some(isError) ? Promise.reject(new PartialList(items)) : items;
}

/**
 * A @cached list field's fill whose items did not all resolve: a failed fill (nothing cached), whose
 * callers are answered with `items` (each failed item an Error there) by listOrThrow.
 */
export class PartialList extends Error {
  constructor(readonly items: readonly unknown[]) {
    super('herdcache: items of a @cached list failed');
    this.name = 'PartialList';
  }
}

/** A failed @cached list field's answer: its items when it failed item by item, else the error, thrown. */
export function listOrThrow(error: unknown): unknown {
  if (error instanceof PartialList) return error.items;
  throw error;
}

/** A rejected item's reason as graphql-js reports it: an Error as it is, anything else wrapped as graphql-js does. */
function asItemError(reason: unknown): Error {
  return isError(reason) ? reason : new Error(`Unexpected error value: ${describe(reason)}`, { cause: reason });
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

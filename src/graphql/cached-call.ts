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
  const scope = operation !== undefined && operation.cache === cache ? operation.scope : undefined;
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
 * failure carries the session of the caller whose resolver failed (./failures).
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
): unknown {
  const operation = operationOf(context);
  const scope = operation !== undefined && operation.cache === cache ? operation.scope : undefined;
  const answer = answerNow(cache, scope, call, key, memoKey);
  if (answer !== LATER) return answer;
  return answerLater(cache, scope, call, key, fillOf(resolve, parent, args, context, info, sessionOf));
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
): () => Promise<unknown> {
  if (sessionOf === undefined) return () => settleList(resolve(parent, args, context, info));
  return async () => {
    try {
      return await settleList(resolve(parent, args, context, info));
    } catch (thrown) {
      throw failedIn(thrown, sessionOf(context));
    }
  };
}

/**
 * A resolver may return a list of promises (`ids.map((id) => loader.load(id))`); graphql-js
 * accepts that, but a cache must hold values, not promises (a rejected one would be served on
 * every hit), so the list is awaited. A failing item fails the field, and nothing is cached.
 * A *returned* Error (or an Error item) is an error to graphql-js too: it is thrown, never cached.
 */
export async function settleList(result: unknown): Promise<unknown> {
  const value = await result;
  if (value instanceof Error) throw value;
  const items = Array.isArray(value) && value.some(isThenable) ? await Promise.all(value) : value;
  if (Array.isArray(items)) {
    const failed = items.find((item) => item instanceof Error);
    if (failed !== undefined) throw failed;
  }
  return items;
}

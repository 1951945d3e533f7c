/**
 * @invalidates(tags:) on mutation fields: once the mutation's resolver has succeeded, every value
 * tagged with one of the filled tags becomes a miss (cache.invalidateTags), on every replica
 * sharing the store, and fills of them in flight are abandoned (their results are not written).
 *
 * The ordering is the point:
 * - after the resolver, never before: invalidating first leaves a window in which a concurrent
 *   read refills the old value from the database the write has not reached yet;
 * - not on failure: a resolver that threw (or returned an Error, which graphql-js treats the same)
 *   is not known to have written anything;
 * - the result is returned only once the invalidation is done, so the client's next query (and
 *   the mutation's own selection set, resolved after this) reads fresh values.
 *
 * An invalidation that cannot be done never fails the mutation: the write happened, and failing
 * the response would invite the client to repeat it. It is reported instead (onInvalidationError;
 * store failures are counted by the registry as storeErrors).
 */
import type { GraphQLField, GraphQLFieldResolver, ConstArgumentNode, ConstValueNode } from 'graphql';
import type { Cache } from '../core/cache';
import { HerdcacheError, isError, isThenable } from '../core/errors';
import { findDirective } from './directive-nodes';
import { type TagTemplate, type TemplateSite, UnfilledTag, fillTemplate, templatesOf } from './tags';
import { notifyQuietly } from './warnings';

export interface InvalidateEnv {
  readonly cache: Cache;
  readonly onInvalidationError: (coordinate: string, error: Error, context: any) => void;
}

/**
 * Reads @invalidates from the field (its SDL, or extensions.directives in a code-first schema): its templates, or undefined without the directive.
 * Throws a build error naming the field when it is not a Mutation field, has no tags, or a template
 * is invalid (see parseTagTemplate).
 */
export function readInvalidates(
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
  onMutation: boolean,
  site: TemplateSite,
  literal: (node: ConstValueNode) => string,
): TagTemplate[] | undefined {
  const node = findDirective(field, 'invalidates', coordinate);
  if (node === undefined) return undefined;
  if (!onMutation) {
    throw buildError(
      `@invalidates cannot be used on ${coordinate}: it runs after a write, so only fields of the Mutation type may carry it`,
    );
  }
  let templates: TagTemplate[] | undefined;
  for (const arg of node.arguments ?? ([] as readonly ConstArgumentNode[])) {
    if (arg.name.value !== 'tags')
      throw buildError(`@invalidates on ${coordinate} has an unknown argument "${arg.name.value}" (known: tags)`);
    templates = templatesOf(arg.value, site, literal);
  }
  if (templates === undefined || templates.length === 0) {
    throw buildError(
      `@invalidates on ${coordinate} needs tags: a non-empty list of tag templates, e.g. tags: ["User:{args.id}"]`,
    );
  }
  return templates;
}

/** Wraps a mutation resolver: resolve, then invalidate the filled tags, then return the result. */
export function invalidatingResolver(
  resolve: GraphQLFieldResolver<unknown, unknown>,
  coordinate: string,
  templates: readonly TagTemplate[],
  env: InvalidateEnv,
): GraphQLFieldResolver<unknown, unknown> {
  const { cache, onInvalidationError } = env;
  const report = (error: Error, context: unknown): void => {
    // A throwing (or rejecting) reporter must not fail a mutation that succeeded.
    notifyQuietly(onInvalidationError, coordinate, error, context);
  };

  // The paths `{result…}` placeholders read: promises on them are awaited before the tags are filled.
  const paths = templates.flatMap((template) =>
    template.placeholders.filter((placeholder) => placeholder.root === 'result').map((placeholder) => placeholder.path),
  );
  return async function invalidatingResolve(parent, args, context, info) {
    // A throw propagates from here, before anything is invalidated.
    const result: unknown = await resolve(parent, args, context, info);
    if (isError(result)) return result;
    const read = paths.length === 0 ? result : await settledAlong(result, paths);
    const tags = new Set<string>();
    for (const template of templates) {
      const filled = fillTemplate(template, { args, result: read });
      if (filled instanceof UnfilledTag) {
        // The other templates are still invalidated: dropping them too would only keep more stale values.
        report(
          new HerdcacheError(
            'E_INVALID_ARGUMENT',
            `herdcache: @invalidates on ${coordinate}: ${filled.reason}; its tags were not invalidated`,
          ),
          context,
        );
      } else {
        for (const tag of filled) tags.add(tag);
      }
    }
    if (tags.size > 0) {
      try {
        // Store failures are absorbed (and counted) by the registry; a rejection here is anything else.
        await cache.invalidateTags([...tags]);
      } catch (error) {
        report(error instanceof Error ? error : new Error(String(error)), context);
      }
    }
    return result;
  };
}

/**
 * `value` as graphql-js answers it along `paths`: a promised field, and a list of promises at a
 * path's end, awaited (a mutation may return `ids.map(async …)` or `{ id: promise }`). A copy
 * along those paths only (its other properties read through its prototype, the value itself);
 * a rejected promise reads as nothing (that placeholder is then reported unfilled).
 */
async function settledAlong(value: unknown, paths: readonly (readonly string[])[]): Promise<unknown> {
  let settled = value;
  try {
    if (isThenable(settled)) settled = await settled;
    if (Array.isArray(settled) && paths.some((path) => path.length === 0) && settled.some(isThenable))
      settled = await Promise.all(settled);
  } catch {
    return undefined;
  }
  if (settled === null || typeof settled !== 'object' || Array.isArray(settled)) return settled;
  const deeper = new Map<string, string[][]>();
  for (const path of paths)
    if (path.length > 0) (deeper.get(path[0]!) ?? deeper.set(path[0]!, []).get(path[0]!)!).push(path.slice(1));
  if (deeper.size === 0) return settled;
  const copy = Object.create(settled) as Record<string, unknown>;
  for (const [name, rest] of deeper) {
    const child = await settledAlong((settled as Record<string, unknown>)[name], rest);
    Object.defineProperty(copy, name, { value: child, enumerable: true, configurable: true, writable: true });
  }
  return copy;
}

function buildError(message: string): HerdcacheError {
  return new HerdcacheError('E_INVALID_ARGUMENT', `herdcache: ${message}`);
}

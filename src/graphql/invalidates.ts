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
import { HerdcacheError, isError } from '../core/errors';
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

  return async function invalidatingResolve(parent, args, context, info) {
    // A throw propagates from here, before anything is invalidated.
    const result: unknown = await resolve(parent, args, context, info);
    if (isError(result)) return result;
    const tags = new Set<string>();
    for (const template of templates) {
      const filled = fillTemplate(template, { args, result });
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

function buildError(message: string): HerdcacheError {
  return new HerdcacheError('E_INVALID_ARGUMENT', `herdcache: ${message}`);
}

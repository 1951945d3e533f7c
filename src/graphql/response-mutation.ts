/**
 * What the response layer says about a mutation's result (./response-cache afterMutation): one
 * whose entity it cannot tag invalidates nothing for it, and the user is told once.
 */
import type { FieldNode } from 'graphql';
import type { Cache } from '../core/cache';
import { findDirective } from './directive-nodes';
import { resultFacts, tagsOnce } from './response-result';
import { operationOfDocument } from './response-policy';
import type { ResponseRequest } from './response-types';
import type { OnceWarnings } from './warnings';

/**
 * A mutation returned an object whose id it did not select: its result invalidates nothing for
 * it. Said once per plugin, unless every root field it ran names its tags with @invalidates.
 */
export function warnUntaggedMutation(request: ResponseRequest, warnings: OnceWarnings): void {
  const operation = operationOfDocument(request.document, request.operationName);
  const fields = request.schema.getMutationType()?.getFields();
  const roots = operation?.selectionSet.selections ?? [];
  // Every root selection a field naming its tags (a fragment: not looked into, said).
  const named = roots.every((node) => {
    if (node.kind !== ('Field' as string)) return false;
    const field = fields?.[(node as FieldNode).name.value];
    return field !== undefined && findDirective(field, 'invalidates', field.name) !== undefined;
  });
  if (roots.length > 0 && named) return;
  warnings.warn(
    'mutation-untagged',
    'HERDCACHE_MUTATION_UNTAGGED',
    `herdcache: the mutation ${operation?.name?.value ?? '(unnamed)'} returned an object whose id it did not select (or whose type could not be told without __typename): it does not invalidate that object's cached responses. Select id (and __typename on interfaces and unions) in mutations, or name the tags with @invalidates.`,
  );
}

/** Invalidates the entities of a mutation's result (ResponseEngine.afterMutation); never fails. */
export async function invalidateResultEntities(
  cache: Cache,
  request: ResponseRequest,
  data: unknown,
  warnings: OnceWarnings,
): Promise<void> {
  const facts = resultFacts(request.schema, request.document, request.operationName, data);
  if (facts === undefined) return;
  if (facts.untagged) warnUntaggedMutation(request, warnings);
  const tags = tagsOnce(facts);
  if (tags.length === 0) return;
  try {
    await cache.invalidateTags(tags);
  } catch {
    // Store failures are counted by the registry; the mutation's response is never failed by the cache.
  }
}

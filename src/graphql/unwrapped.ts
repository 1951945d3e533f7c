/**
 * A schema whose @cached or @invalidates fields were never wrapped by cachedDirectiveTransformer:
 * the transform not applied (a NestJS app without `transformSchema`), or applied before the
 * resolvers were attached (they replaced its wrappers). Those fields then run on every call and
 * the reports say zeros: nothing fails, so the plugins say it once (HERDCACHE_NOT_TRANSFORMED)
 * when they are given the schema.
 */
import type { GraphQLField, GraphQLObjectType, GraphQLSchema } from 'graphql';
import { isInstalled } from './directive';
import { findDirective } from './directive-nodes';
import { tagOf } from './response-policy';
import type { OnceWarnings } from './warnings';

/** The process.emitWarning code of a schema whose @cached fields are not wrapped. */
export const NOT_TRANSFORMED_WARNING = 'HERDCACHE_NOT_TRANSFORMED';

/** The coordinates of the fields carrying @cached or @invalidates whose resolver the transform did not install (the first `limit`). */
export function unwrappedFields(schema: GraphQLSchema, limit = 5): string[] {
  const found: string[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || tagOf(type) !== 'GraphQLObjectType') continue;
    for (const field of Object.values((type as GraphQLObjectType).getFields()) as GraphQLField<unknown, unknown>[]) {
      const coordinate = `${type.name}.${field.name}`;
      if (!carriesDirective(field, coordinate) || isInstalled(field.resolve)) continue;
      found.push(coordinate);
      if (found.length >= limit) return found;
    }
  }
  return found;
}

function carriesDirective(field: GraphQLField<unknown, unknown>, coordinate: string): boolean {
  try {
    return (
      findDirective(field, 'cached', coordinate) !== undefined ||
      findDirective(field, 'invalidates', coordinate) !== undefined
    );
  } catch {
    return false; // malformed extensions: the transform refuses them itself
  }
}

/** Warns once (per plugin) when `schema` has @cached or @invalidates fields the transform did not wrap. */
export function warnIfUnwrapped(schema: GraphQLSchema, warnings: OnceWarnings, plugin: string): void {
  let fields: string[];
  try {
    fields = unwrappedFields(schema);
  } catch {
    return; // a schema it cannot read: never a reason to fail the server
  }
  if (fields.length === 0) return;
  warnings.warn(
    'not-transformed',
    NOT_TRANSFORMED_WARNING,
    `herdcache: ${plugin} was given a schema whose @cached or @invalidates fields are not wrapped (${fields.join(', ')}${fields.length >= 5 ? ', …' : ''}): they run on every call, uncached, and the reports count nothing for them. Apply cachedDirectiveTransformer(schema, { cache }) to the schema after its resolvers are attached (in NestJS: transformSchema).`,
  );
}

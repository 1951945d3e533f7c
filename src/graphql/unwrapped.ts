/**
 * A schema whose @cached or @invalidates fields were never wrapped by cachedDirectiveTransformer:
 * the transform not applied (a NestJS app without `transformSchema`). Those fields then run on
 * every call and the reports say zeros: nothing fails, so the plugins say it once
 * (HERDCACHE_NOT_TRANSFORMED) when they are given the schema. A field counts as wrapped by its
 * resolver or by the transform's mark in its extensions (directive.ts: a tool applied after the
 * transform, graphql-middleware or graphql-shield, wraps the resolver again), so resolvers attached
 * after the transform (which replace its wrappers) are not seen here. A Federation entity type
 * carrying @cached counts by its reference resolver (`Product.__resolveReference`).
 */
import type { GraphQLField, GraphQLNamedType, GraphQLObjectType, GraphQLSchema } from 'graphql';
import { installed, isWrapped } from './wrapped';
import { referenceResolverOf } from './entities';
import { findDirective } from './directive-nodes';
import { tagOf } from './schema-hints';
import type { OnceWarnings } from './warnings';

/** Fields a warning names at most. */
const SHOWN = 5;

/** The process.emitWarning code of a schema whose @cached fields are not wrapped. */
export const NOT_TRANSFORMED_WARNING = 'HERDCACHE_NOT_TRANSFORMED';

/** The coordinates of the fields carrying @cached or @invalidates whose resolver the transform did not install (the first `limit`). */
export function unwrappedFields(schema: GraphQLSchema, limit: number): string[] {
  const found: string[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__') || tagOf(type) !== 'GraphQLObjectType') continue;
    // A Federation entity type carrying @cached: its reference resolver is what the transform wraps.
    if (carriesCached(type, type.name)) {
      const resolve = referenceResolverOf(type as GraphQLObjectType);
      if (resolve !== undefined && !installed.has(resolve)) found.push(`${type.name}.__resolveReference`);
      if (found.length >= limit) return found;
    }
    for (const field of Object.values((type as GraphQLObjectType).getFields()) as GraphQLField<unknown, unknown>[]) {
      const coordinate = `${type.name}.${field.name}`;
      if (!carriesDirective(field, coordinate) || isWrapped(field)) continue;
      found.push(coordinate);
      if (found.length >= limit) return found;
    }
  }
  return found;
}

function carriesCached(type: GraphQLNamedType, coordinate: string): boolean {
  try {
    return findDirective(type, 'cached', coordinate) !== undefined;
  } catch {
    return false;
  }
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
    fields = unwrappedFields(schema, SHOWN + 1);
  } catch {
    return; // a schema it cannot read: never a reason to fail the server
  }
  if (fields.length === 0) return;
  warnings.warn(
    'not-transformed',
    NOT_TRANSFORMED_WARNING,
    `herdcache: ${plugin} was given a schema whose @cached or @invalidates fields were not wrapped by cachedDirectiveTransformer (${fields.slice(0, SHOWN).join(', ')}${fields.length > SHOWN ? ', …' : ''}): they run on every call, uncached, and the reports count nothing for them. Apply cachedDirectiveTransformer(schema, { cache }) to the schema after its resolvers are attached (in NestJS: transformSchema).`,
  );
}

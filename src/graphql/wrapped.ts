/**
 * The resolvers cachedDirectiveTransformer installed, and its mark on the fields it wrapped: how
 * the transform refuses a second pass over one schema (directive.ts), and how the plugins tell a
 * schema it never wrapped (./unwrapped).
 */
import type { GraphQLField } from 'graphql';

/** Resolvers the transform installed: a second transform of the same schema would cache twice. */
export const installed = new WeakSet<object>();

/**
 * Marks the field's extensions as wrapped by the transform. A schema tool applied after it
 * (graphql-middleware, graphql-shield: graphql-tools' mapSchema) wraps the resolver again and may
 * copy the field, but keeps its extensions object: the mark tells the plugins' check
 * (./unwrapped) that the transform ran, so it does not say otherwise.
 */
const WRAPPED: unique symbol = Symbol.for('herdcache.wrapped');

export function markWrapped(field: GraphQLField<unknown, unknown>): void {
  try {
    (field.extensions as Record<symbol, unknown>)[WRAPPED] = true;
  } catch {
    // Frozen extensions: the resolver's identity is the only sign left (isWrapped).
  }
}

/** Whether cachedDirectiveTransformer wrapped this field: its resolver, or the mark in its extensions. */
export function isWrapped(field: GraphQLField<unknown, unknown>): boolean {
  const resolve = field.resolve;
  if (typeof resolve === 'function' && installed.has(resolve)) return true;
  const extensions = field.extensions as Record<symbol, unknown> | null | undefined;
  return extensions?.[WRAPPED] === true;
}

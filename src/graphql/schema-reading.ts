/**
 * Reading a schema's types and fields without a runtime graphql import (graphql is an optional
 * peer, and the schema given may have been built by another copy of it): what the @cached
 * transform needs to know of a field's type, and graphql-js's default resolver, restated.
 */
import type { GraphQLFieldResolver, GraphQLNamedType, GraphQLOutputType } from 'graphql';

/** Whether a field's type is a list (`[T]`, `[T]!`), read without a runtime graphql import. */
export function isListField(type: GraphQLOutputType): boolean {
  return String(type).startsWith('['); // `[T]`, `[T]!`, as graphql-js prints a type
}

/** graphql-js's defaultFieldResolver, restated so this module needs no runtime graphql import. */
export const defaultFieldResolver: GraphQLFieldResolver<unknown, unknown> = (source, args, context, info) => {
  if ((typeof source === 'object' && source !== null) || typeof source === 'function') {
    const property = (source as Record<string, unknown>)[info.fieldName];
    if (typeof property === 'function')
      return (source as Record<string, (...a: unknown[]) => unknown>)[info.fieldName]!(args, context, info);
    return property;
  }
  return undefined;
};

export function propertyOf(name: string): (parent: any) => unknown {
  return (parent) => parent[name];
}

/** graphql 16 types carry Symbol.toStringTag ("GraphQLObjectType"…): no instanceof, so no runtime import. */
export function kindOf(type: GraphQLNamedType | undefined): 'object' | 'interface' | undefined {
  const tag = type === undefined ? undefined : Object.prototype.toString.call(type);
  return tag === '[object GraphQLObjectType]'
    ? 'object'
    : tag === '[object GraphQLInterfaceType]'
      ? 'interface'
      : undefined;
}

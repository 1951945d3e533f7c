/**
 * A copy of a schema with type and field objects of its own, in the original's order. The copy's
 * fields can be given other resolvers without touching the user's schema; everything else is
 * the original's: resolvers, resolveType and isTypeOf, scalars, enum values, defaults, directives,
 * extensions, AST nodes.
 *
 * The order is why this is not graphql's lexicographicSortSchema: introspection answers in schema
 * order (`__type { fields }`, `__schema { types }`), and a union's or interface's possible types
 * are tried in order by isTypeOf. A copy in another order answers some operations differently.
 */
import type * as GraphQL from 'graphql';
import type { GraphQLNamedType, GraphQLSchema, GraphQLType } from 'graphql';

export function copySchema(graphql: typeof GraphQL, schema: GraphQLSchema): GraphQLSchema {
  const config = schema.toConfig();
  const copies = new Map<string, GraphQLNamedType>();
  for (const type of config.types) copies.set(type.name, copyNamed(type));
  const named = <T extends GraphQLNamedType>(type: T): T => copies.get(type.name) as T;
  const maybe = <T extends GraphQLNamedType>(type: T | null | undefined): T | undefined =>
    type === null || type === undefined ? undefined : named(type);
  return new graphql.GraphQLSchema({
    ...config,
    query: maybe(config.query),
    mutation: maybe(config.mutation),
    subscription: maybe(config.subscription),
    types: [...copies.values()],
    directives: config.directives.map((directive) => {
      const given = directive.toConfig();
      return new graphql.GraphQLDirective({ ...given, args: args(given.args) });
    }),
  });

  function wrapped<T extends GraphQLType>(type: T): T {
    if (graphql.isListType(type)) return new graphql.GraphQLList(wrapped(type.ofType)) as T;
    if (graphql.isNonNullType(type)) return new graphql.GraphQLNonNull(wrapped(type.ofType)) as T;
    return named(type as GraphQLNamedType) as T;
  }

  function args(given: GraphQL.GraphQLFieldConfigArgumentMap): GraphQL.GraphQLFieldConfigArgumentMap {
    const copied: GraphQL.GraphQLFieldConfigArgumentMap = {};
    for (const [name, arg] of Object.entries(given)) copied[name] = { ...arg, type: wrapped(arg.type) };
    return copied;
  }

  function fields(
    given: GraphQL.GraphQLFieldConfigMap<unknown, unknown>,
  ): GraphQL.GraphQLFieldConfigMap<unknown, unknown> {
    const copied: GraphQL.GraphQLFieldConfigMap<unknown, unknown> = {};
    for (const [name, field] of Object.entries(given))
      copied[name] = { ...field, type: wrapped(field.type), args: field.args && args(field.args) };
    return copied;
  }

  function copyNamed(type: GraphQLNamedType): GraphQLNamedType {
    // Scalars have no type references; introspection types are the ones every schema shares.
    if (graphql.isScalarType(type) || graphql.isIntrospectionType(type)) return type;
    if (graphql.isObjectType(type)) {
      const given = type.toConfig();
      return new graphql.GraphQLObjectType({
        ...given,
        interfaces: () => given.interfaces.map(named),
        fields: () => fields(given.fields),
      });
    }
    if (graphql.isInterfaceType(type)) {
      const given = type.toConfig();
      return new graphql.GraphQLInterfaceType({
        ...given,
        interfaces: () => given.interfaces.map(named),
        fields: () => fields(given.fields),
      });
    }
    if (graphql.isUnionType(type)) {
      const given = type.toConfig();
      return new graphql.GraphQLUnionType({ ...given, types: () => given.types.map(named) });
    }
    if (graphql.isEnumType(type)) return new graphql.GraphQLEnumType(type.toConfig());
    const given = type.toConfig();
    return new graphql.GraphQLInputObjectType({
      ...given,
      fields: () => {
        const copied: GraphQL.GraphQLInputFieldConfigMap = {};
        for (const [name, field] of Object.entries(given.fields))
          copied[name] = { ...field, type: wrapped(field.type) };
        return copied;
      },
    });
  }
}

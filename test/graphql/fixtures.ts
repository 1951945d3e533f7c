/** Test fixtures for the GraphQL layer: a schema from SDL + a resolver map (no graphql-tools), and an executor. */
import {
  buildSchema,
  graphql,
  type ExecutionResult,
  type GraphQLFieldResolver,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import { cachedDirectiveTypeDefs } from '../../src/graphql/sdl';

export type Resolvers = Record<string, Record<string, GraphQLFieldResolver<any, any>>>;

/** Builds `typeDefs` (with the @cached SDL prepended) and installs `resolvers` on its fields. */
export function makeSchema(typeDefs: string, resolvers: Resolvers = {}): GraphQLSchema {
  const schema = buildSchema(`${cachedDirectiveTypeDefs}\n${typeDefs}`);
  for (const [typeName, fields] of Object.entries(resolvers)) {
    const type = schema.getType(typeName) as GraphQLObjectType | undefined;
    if (type === undefined) throw new Error(`no type ${typeName}`);
    for (const [fieldName, resolve] of Object.entries(fields)) {
      const field = type.getFields()[fieldName];
      if (field === undefined) throw new Error(`no field ${typeName}.${fieldName}`);
      field.resolve = resolve;
    }
  }
  return schema;
}

export function run(
  schema: GraphQLSchema,
  source: string,
  contextValue: unknown = {},
  variableValues?: Record<string, unknown>,
): Promise<ExecutionResult> {
  return graphql({ schema, source, contextValue, variableValues });
}

/** Counts calls per label: `counter.calls.x` after `counter.count('x')`. */
export function callCounter() {
  const calls: Record<string, number> = {};
  return {
    calls,
    count(label: string) {
      calls[label] = (calls[label] ?? 0) + 1;
    },
  };
}

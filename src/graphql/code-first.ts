/**
 * The directives as graphql-js objects, for schemas built in code: NestJS
 * (`buildSchemaOptions: { directives: herdcacheDirectives }`), `new GraphQLSchema({ directives })`,
 * Pothos, TypeGraphQL. Built from `cachedDirectiveTypeDefs`, so they are the SDL's directives
 * exactly (descriptions, defaults, locations). A schema given them also gets `enum CacheScope`
 * (graphql-js collects the types of directive arguments).
 *
 * This is the one module of herdcache/graphql that needs graphql at load: graphql 16 is the
 * entry's peer, and a GraphQLDirective is only what graphql's own class makes.
 */
import { type GraphQLDirective, type GraphQLEnumType, buildSchema } from 'graphql';
import { cachedDirectiveTypeDefs } from './sdl';

const definitions = buildSchema(cachedDirectiveTypeDefs);

/** `@cached(ttl: Int!, swr: Int, scope: CacheScope = PUBLIC, tags: [String!]) on FIELD_DEFINITION | OBJECT`. */
export const cachedDirective: GraphQLDirective = definitions.getDirective('cached')!;

/** `@invalidates(tags: [String!]!) on FIELD_DEFINITION`. */
export const invalidatesDirective: GraphQLDirective = definitions.getDirective('invalidates')!;

/** `enum CacheScope { PUBLIC PRIVATE }`: its values' internal values are the names ('PUBLIC', 'PRIVATE'). */
export const CacheScopeEnum: GraphQLEnumType = definitions.getType('CacheScope') as GraphQLEnumType;

/** Both directives, for a `directives` option: `[...specifiedDirectives, ...herdcacheDirectives]`. */
export const herdcacheDirectives: readonly GraphQLDirective[] = [cachedDirective, invalidatesDirective];

/** The SDL is defined once (schema/cached.graphql) and exported byte for byte. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildSchema, GraphQLDirective, type GraphQLEnumType } from 'graphql';
import { cachedDirectiveTypeDefs } from '../../src/graphql';

describe('cachedDirectiveTypeDefs', () => {
  it('equals schema/cached.graphql byte for byte', () => {
    const file = readFileSync(join(__dirname, '../../schema/cached.graphql'));
    expect(Buffer.from(cachedDirectiveTypeDefs, 'utf8').equals(file)).toBe(true);
  });

  it('declares @cached(ttl: Int!, swr: Int, scope: CacheScope = PUBLIC, tags: [String!]) on FIELD_DEFINITION | OBJECT', () => {
    const schema = buildSchema(`${cachedDirectiveTypeDefs}\ntype Query { a: Int @cached(ttl: 5) }`);
    const directive = schema.getDirective('cached');
    expect(directive).toBeInstanceOf(GraphQLDirective);
    expect(directive!.locations).toEqual(['FIELD_DEFINITION', 'OBJECT']);
    expect(directive!.args.map((arg) => [arg.name, String(arg.type), arg.defaultValue])).toEqual([
      ['ttl', 'Int!', undefined],
      ['swr', 'Int', undefined],
      ['scope', 'CacheScope', 'PUBLIC'],
      ['tags', '[String!]', undefined],
    ]);
    expect((schema.getType('CacheScope') as GraphQLEnumType).getValues().map((value) => value.name)).toEqual([
      'PUBLIC',
      'PRIVATE',
    ]);
  });

  it('declares @invalidates(tags: [String!]!) on FIELD_DEFINITION', () => {
    const schema = buildSchema(
      `${cachedDirectiveTypeDefs}\ntype Query { a: Int } type Mutation { b: Int @invalidates(tags: ["A"]) }`,
    );
    const directive = schema.getDirective('invalidates');
    expect(directive).toBeInstanceOf(GraphQLDirective);
    expect(directive!.locations).toEqual(['FIELD_DEFINITION']);
    expect(directive!.args.map((arg) => [arg.name, String(arg.type), arg.defaultValue])).toEqual([
      ['tags', '[String!]!', undefined],
    ]);
  });
});

/**
 * Code-first schemas: the directives as GraphQLDirective objects, and @cached / @invalidates read
 * from `extensions.directives` in the forms graphql-tools and Pothos write (an object by name, an
 * object of argument lists, a list of { name, args }), not only from SDL AST nodes.
 */
import {
  GraphQLID,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  printSchema,
  specifiedDirectives,
} from 'graphql';
import { createCache } from '../../src/core/cache';
import {
  CacheScopeEnum,
  cachedDirective,
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  herdcacheContext,
  herdcacheDirectives,
  invalidatesDirective,
} from '../../src/graphql';
import { callCounter, run } from './fixtures';

type DirectiveExtensions = Record<string, unknown> | { name: string; args?: Record<string, unknown> }[];

function codeFirstSchema(directives: {
  user?: DirectiveExtensions;
  rename?: DirectiveExtensions;
  scored?: DirectiveExtensions;
}) {
  const counter = callCounter();
  const User = new GraphQLObjectType({
    name: 'User',
    fields: {
      id: { type: new GraphQLNonNull(GraphQLID) },
      name: { type: GraphQLString },
      score: {
        type: GraphQLInt,
        extensions: directives.scored === undefined ? {} : { directives: directives.scored },
        resolve: (user: { id: string }) => {
          counter.count(`score:${user.id}`);
          return 7;
        },
      },
    },
  });
  const names = new Map<string, string>([['1', 'Ada']]);
  const schema = new GraphQLSchema({
    directives: [...specifiedDirectives, ...herdcacheDirectives],
    query: new GraphQLObjectType({
      name: 'Query',
      fields: {
        user: {
          type: User,
          args: { id: { type: new GraphQLNonNull(GraphQLID) } },
          extensions: directives.user === undefined ? {} : { directives: directives.user },
          resolve: (_parent, { id }: { id: string }) => {
            counter.count(`user:${id}`);
            return { id, name: names.get(id) };
          },
        },
      },
    }),
    mutation: new GraphQLObjectType({
      name: 'Mutation',
      fields: {
        rename: {
          type: User,
          args: { id: { type: new GraphQLNonNull(GraphQLID) }, name: { type: new GraphQLNonNull(GraphQLString) } },
          extensions: directives.rename === undefined ? {} : { directives: directives.rename },
          resolve: (_parent, { id, name }: { id: string; name: string }) => {
            names.set(id, name);
            return { id, name };
          },
        },
      },
    }),
  });
  return { schema, counter };
}

async function stampede(
  schema: GraphQLSchema,
  n: number,
  source = '{ user(id: "1") { id name score } }',
  context: () => object = () => ({}),
) {
  const results = await Promise.all(Array.from({ length: n }, () => run(schema, source, context())));
  for (const result of results) expect(result.errors).toBeUndefined();
  return results;
}

describe('GraphQLDirective objects', () => {
  it('are the SDL directives: a schema given them prints @cached, @invalidates and enum CacheScope as cachedDirectiveTypeDefs declares them', () => {
    const { schema } = codeFirstSchema({});
    const printed = printSchema(schema);
    expect(cachedDirective.name).toBe('cached');
    expect(cachedDirective.locations).toEqual(['FIELD_DEFINITION', 'OBJECT']);
    expect(invalidatesDirective.name).toBe('invalidates');
    expect(CacheScopeEnum.getValues().map((value) => value.value)).toEqual(['PUBLIC', 'PRIVATE']);
    expect(schema.getType('CacheScope')).toBe(CacheScopeEnum);
    for (const line of [
      'directive @cached(',
      ') on FIELD_DEFINITION | OBJECT',
      'directive @invalidates(',
      'enum CacheScope {',
      'scope: CacheScope = PUBLIC',
    ]) {
      expect(printed).toContain(line);
      expect(cachedDirectiveTypeDefs).toContain(line);
    }
  });
});

describe('@cached in extensions.directives', () => {
  const forms: [string, DirectiveExtensions][] = [
    ['an object by name (graphql-tools)', { cached: { ttl: 60 } }],
    [
      'an object of argument lists (graphql-tools getDirectivesInExtensions, Pothos unordered)',
      { cached: [{ ttl: 60 }] },
    ],
    [
      'a list of { name, args } (Pothos)',
      [
        { name: 'deprecatedLike', args: {} },
        { name: 'cached', args: { ttl: 60 } },
      ],
    ],
  ];
  it.each(forms)('%s: 50 concurrent queries → the resolver runs once', async (_form, user) => {
    const cache = createCache();
    const { schema, counter } = codeFirstSchema({ user, scored: user });
    cachedDirectiveTransformer(schema, { cache });
    await stampede(schema, 50);
    expect(counter.calls['user:1']).toBe(1);
    expect(counter.calls['score:1']).toBe(1);
  });

  it('without the directive every query runs the resolver (the count above comes from the extension)', async () => {
    const cache = createCache();
    const { schema, counter } = codeFirstSchema({});
    cachedDirectiveTransformer(schema, { cache });
    await stampede(schema, 50);
    expect(counter.calls['user:1']).toBe(50);
  });

  it('scope given as the enum internal value (a string): PRIVATE keys by session', async () => {
    const cache = createCache();
    const { schema, counter } = codeFirstSchema({ user: { cached: { ttl: 60, scope: 'PRIVATE' } } });
    cachedDirectiveTransformer(schema, { cache, sessionId: (ctx: { user?: string }) => ctx.user });
    await stampede(schema, 10, undefined, () => ({ user: 'a' }));
    await stampede(schema, 10, undefined, () => ({ user: 'b' }));
    expect(counter.calls['user:1']).toBe(2);
  });

  it.each([
    [{ cached: { ttl: 1.5 } }, '@cached(ttl:) on Query.user must be a positive integer number of seconds, got 1.5'],
    [{ cached: { ttl: '60' } }, '@cached(ttl:) on Query.user must be a positive integer number of seconds, got "60"'],
    [{ cached: { ttl: 60, scope: 'SHARED' } }, '@cached(scope:) on Query.user must be PUBLIC or PRIVATE, got "SHARED"'],
    [{ cached: { ttl: 60, tags: [1] } }, '@cached(tags:) on Query.user: each tag must be a string, got 1'],
    // Values printed as SDL shows them, not as the kind of their syntax node (was: got ObjectValue).
    [
      { cached: { ttl: { a: 1 } } },
      '@cached(ttl:) on Query.user must be a positive integer number of seconds, got {a: 1}',
    ],
    [{ cached: { ttl: [5] } }, '@cached(ttl:) on Query.user must be a positive integer number of seconds, got [5]'],
    [{ cached: { ttl: null } }, '@cached(ttl:) on Query.user must be a positive integer number of seconds, got null'],
    [{ cached: { ttl: 60, tags: [null] } }, '@cached(tags:) on Query.user: each tag must be a string, got null'],
    [{ cached: { ttl: 60, tags: [['x']] } }, '@cached(tags:) on Query.user: each tag must be a string, got ["x"]'],
    [{ cached: { swr: 5 } }, '@cached on Query.user needs ttl'],
    [{ cached: { ttl: 60, tll: 5 } }, '@cached on Query.user has an unknown argument "tll"'],
    [{ cached: 60 }, '@cached on Query.user: extensions.directives.cached must be an object of arguments, got 60'],
    [
      { cached: [{ ttl: 5 }, { ttl: 10, scope: 'PRIVATE' }] },
      '@cached on Query.user is given 2 times in extensions.directives: it is not repeatable',
    ],
    [
      [
        { name: 'cached', args: { ttl: 5 } },
        { name: 'cached', args: { ttl: 10, scope: 'PRIVATE' } },
      ],
      '@cached on Query.user is given 2 times in extensions.directives: it is not repeatable',
    ],
  ])('a bad value is a build error naming the field and the value: %j', (user, message) => {
    const cache = createCache();
    const { schema } = codeFirstSchema({ user });
    expect(() => cachedDirectiveTransformer(schema, { cache })).toThrow(message);
  });

  it('the AST wins when both carry the directive (Pothos writes both from the same values)', async () => {
    const cache = createCache();
    const { schema, counter } = codeFirstSchema({ user: { cached: { ttl: 1.5 } } }); // invalid: never read
    const field = (schema.getType('Query') as GraphQLObjectType).getFields().user!;
    const ast = {
      kind: 'Directive',
      name: { kind: 'Name', value: 'cached' },
      arguments: [{ kind: 'Argument', name: { kind: 'Name', value: 'ttl' }, value: { kind: 'IntValue', value: '60' } }],
    };
    (field as { astNode: unknown }).astNode = {
      kind: 'FieldDefinition',
      name: { kind: 'Name', value: 'user' },
      directives: [ast],
    };
    cachedDirectiveTransformer(schema, { cache });
    await stampede(schema, 5);
    expect(counter.calls['user:1']).toBe(1);
  });
});

describe('@invalidates in extensions.directives', () => {
  it.each([
    ['an object by name', { invalidates: { tags: ['User:{args.id}'] } }],
    ['a list of { name, args }', [{ name: 'invalidates', args: { tags: ['User:{args.id}'] } }]],
  ] as [string, DirectiveExtensions][])(
    '%s: the mutation drops the tagged value, the next query is fresh',
    async (_form, rename) => {
      const cache = createCache();
      const { schema, counter } = codeFirstSchema({ user: { cached: { ttl: 60, tags: ['User:{args.id}'] } }, rename });
      cachedDirectiveTransformer(schema, { cache });
      const before = await run(schema, '{ user(id: "1") { name } }', herdcacheContext({ cache }));
      expect(before.data).toEqual({ user: { name: 'Ada' } });
      const mutated = await run(
        schema,
        'mutation { rename(id: "1", name: "Grace") { name } }',
        herdcacheContext({ cache }),
      );
      expect(mutated.errors).toBeUndefined();
      const after = await run(schema, '{ user(id: "1") { name } }', herdcacheContext({ cache }));
      expect(after.data).toEqual({ user: { name: 'Grace' } });
      expect(counter.calls['user:1']).toBe(2);
    },
  );
});

/**
 * Loaders, raw getOrCompute keys and @cached fields never share store keys: field keys live in a
 * namespace of their own (core/namespaces) that no loader name and no raw key can spell.
 */
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { cachedFieldKey } from '../../src/graphql/keys';
import { makeSchema, run } from './fixtures';

const typeDefs = 'type Query { greeting: String @cached(ttl: 60) }';

it('a loader named like the key prefix head and the directive coexist, and never meet', async () => {
  const cache = createCache();
  const schema = makeSchema(typeDefs, { Query: { greeting: () => 'hello' } });
  cachedDirectiveTransformer(schema, { cache });
  const batch = jest.fn(async (keys: readonly string[]) => keys.map((k) => `loader ${k}`));
  const gql = cache.loader({ name: 'gql', batch });
  expect((await run(schema, '{ greeting }')).data).toEqual({ greeting: 'hello' });
  // The loader key that spells the field's old key (`gql:Query.greeting:[null,{}]`) is the loader's own.
  expect(await gql.load('Query.greeting:[null,{}]')).toBe('loader Query.greeting:[null,{}]');
  expect(batch).toHaveBeenCalledTimes(1);
  expect(gql.storeKey('Query.greeting:[null,{}]')).not.toBe(cachedFieldKey('Query.greeting'));
});

it('a loader made before the directive does not stop it (any prefix)', async () => {
  const cache = createCache();
  cache.loader({ name: 'gql', batch: async (keys: readonly string[]) => keys });
  const schema = makeSchema(typeDefs, { Query: { greeting: () => 'hello' } });
  cachedDirectiveTransformer(schema, { cache });
  expect((await run(schema, '{ greeting }')).data).toEqual({ greeting: 'hello' });
});

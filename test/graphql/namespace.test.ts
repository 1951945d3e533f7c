/** Loaders and @cached fields never share store keys: the directive reserves its key prefix. */
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { makeSchema, run } from './fixtures';

const typeDefs = 'type Query { greeting: String @cached(ttl: 60) }';

it('a loader named like the key prefix head cannot be made after the directive is installed', async () => {
  const cache = createCache();
  const schema = makeSchema(typeDefs, { Query: { greeting: () => 'hello' } });
  cachedDirectiveTransformer(schema, { cache });
  expect(() => cache.loader({ name: 'gql', batch: async (keys: readonly string[]) => keys })).toThrow(/option "name".*the @cached directive \(keyPrefix "gql:"\)/);
  expect((await run(schema, '{ greeting }')).data).toEqual({ greeting: 'hello' });
});

it('the directive refuses a key prefix that an existing loader writes under, and leaves the schema untouched', () => {
  const cache = createCache();
  cache.loader({ name: 'gql', batch: async (keys: readonly string[]) => keys });
  const resolve = () => 'hello';
  const schema = makeSchema(typeDefs, { Query: { greeting: resolve } });
  expect(() => cachedDirectiveTransformer(schema, { cache })).toThrow(/writes keys under "gql:", which the loader named "gql" uses too/);
  expect(schema.getQueryType()!.getFields().greeting!.resolve).toBe(resolve);
  // Another prefix is fine.
  cachedDirectiveTransformer(schema, { cache, keyPrefix: 'fields:' });
});

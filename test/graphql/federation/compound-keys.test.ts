/**
 * A @cached field of an entity whose @key needs more than `id` (`@key(fields: "id locale")`) is
 * keyed, by default, with the fields of that key: by `id` alone, the value computed for one locale
 * was served for every other. A type keyed by `id` (among other keys) keeps `id`.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import { graphql, parse } from 'graphql';
import { createCache } from '../../../src/core/cache';
import { memoryStore } from '../../../src/core/memory';
import {
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  cachedFieldKey,
  canonicalArgs,
} from '../../../src/graphql';

const LINK = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])';
/** Federation's namespace renamed (`as: "fed"`): its directives are `@fed__key`, … */
const RENAMED = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", as: "fed", import: [])';

function subgraph(keys: string, fields = 'id: ID!, locale: String!', link = LINK) {
  const store = memoryStore();
  const cache = createCache({ store });
  let calls = 0;
  const schema = buildSubgraphSchema({
    typeDefs: parse(`${link}
      ${cachedDirectiveTypeDefs}
      type Translation ${keys} { ${fields}, text: String @cached(ttl: 60) }
      type Query { translation(id: ID!, locale: String!): Translation }`),
    resolvers: {
      Query: { translation: (_: unknown, args: { id: string; locale: string }) => ({ ...args, sku: `s${args.id}` }) },
      Translation: {
        __resolveReference: (reference: Record<string, string>) => ({ sku: `s${reference.id}`, ...reference }),
        text: (t: { id: string; locale: string }) => (calls++, `${t.id} in ${t.locale}`),
      },
    } as never,
  });
  cachedDirectiveTransformer(schema, { cache });
  const entities = async (representations: Record<string, string>[]) => {
    const result = await graphql({
      schema,
      source: 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Translation { text } } }',
      variableValues: { r: representations.map((r) => ({ __typename: 'Translation', ...r })) },
    });
    expect(result.errors).toBeUndefined();
    return (result.data as { _entities: { text: string }[] })._entities.map((e) => e.text);
  };
  const root = async (id: string, locale: string) => {
    const result = await graphql({ schema, source: `{ translation(id: "${id}", locale: "${locale}") { text } }` });
    expect(result.errors).toBeUndefined();
    return (result.data as { translation: { text: string } }).translation.text;
  };
  return { entities, root, store, calls: () => calls };
}

describe('@cached fields of an entity with a compound @key', () => {
  it.each([
    ['@key', LINK, '@key(fields: "id locale")'],
    ['@fed__key (the namespace renamed with @link(as:))', RENAMED, '@fed__key(fields: "id locale")'],
  ])(
    'are keyed with the fields of the key (%s): each locale its own value, each computed once',
    async (_name, link, key) => {
      const { entities, root, calls } = subgraph(key, undefined, link);
      expect(
        await entities([
          { id: '1', locale: 'en' },
          { id: '1', locale: 'fr' },
        ]),
      ).toEqual(['1 in en', '1 in fr']);
      expect(await root('1', 'de')).toBe('1 in de');
      expect(await entities([{ id: '1', locale: 'fr' }])).toEqual(['1 in fr']);
      expect(await root('1', 'en')).toBe('1 in en');
      expect(calls()).toBe(3);
    },
  );

  it("the identity is the key's fields as canonicalArgs encodes them (cachedFieldKey with it finds the value)", async () => {
    const { root, store } = subgraph('@key(fields: "id locale")');
    await root('1', 'en');
    const identity = canonicalArgs({ locale: 'en', id: '1' })!;
    expect(identity).toBe('{"id":"1","locale":"en"}');
    expect(store.getSync(cachedFieldKey('Translation.text', { identity }))?.value).toBe('1 in en');
  });

  it('a type also keyed by `id` alone keeps `id` as its identity', async () => {
    const { root, store } = subgraph('@key(fields: "id") @key(fields: "id locale")');
    await root('1', 'en');
    expect(store.getSync(cachedFieldKey('Translation.text', { identity: '1' }))?.value).toBe('1 in en');
  });

  it('a type keyed by other fields that has an `id` keeps `id` (as before: keys built with it still match)', async () => {
    const { root, store } = subgraph('@key(fields: "sku")', 'id: ID!, locale: String!, sku: String!');
    await root('1', 'en');
    expect(store.getSync(cachedFieldKey('Translation.text', { identity: '1' }))?.value).toBe('1 in en');
  });
});

/**
 * One invalidation model (docs/response-cache.md): a whole response is tagged with the tags of
 * what it read through the operation's scope, loaders' `tags` and `scope.getOrCompute(…, { tags })`
 * as well as `@cached(tags:)` fields. Only the directive noted its tags: after
 * `invalidateTags(['User:1'])` the loader refetched, but the stored response kept serving the old
 * name for its maxAge (a reviewer: hit, alice, on Apollo and Yoga, memory and Redis). Counted:
 * database reads and outcomes.
 */
import { ApolloServer } from '@apollo/server';
import { buildSchema } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { herdcacheContext } from '../../src/graphql';
import { memoryAndRedis } from '../redis/helpers';

const stores = memoryAndRedis('loader-tags');

const sdl = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { authorName(id: ID!): String @cacheControl(maxAge: 60), title(id: ID!): String @cacheControl(maxAge: 60) }`;

describe.each(stores)('response tagged by loader and getOrCompute tags (%s)', (_name, store) => {
  it('invalidateTags reaches the stored response', async () => {
    const db: Record<string, string> = { '1': 'alice' };
    const titles: Record<string, string> = { '1': 'first' };
    let reads = 0;
    const given = store();
    const cache = createCache({ ttl: 60_000, ...(given === undefined ? {} : { store: given }) });
    const users = cache.loader<string, string>({
      name: 'user',
      batch: async (ids) => ids.map((id) => (reads++, db[id]!)),
      tags: (id) => [`User:${id}`],
    });
    type Ctx = ReturnType<typeof herdcacheContext<{ user: typeof users }>>;
    const schema = buildSchema(sdl);
    const fields = schema.getQueryType()!.getFields();
    fields.authorName!.resolve = (_p, { id }: { id: string }, ctx: Ctx) => ctx.loaders.user.load(id);
    fields.title!.resolve = (_p, { id }: { id: string }, ctx: Ctx) =>
      ctx.scope.getOrCompute(`title:${id}`, async () => (reads++, titles[id]), { tags: [`Post:${id}`] });
    const server = new ApolloServer({
      schema,
      plugins: [herdcachePlugin({ cache, responseCache: true, extensions: true })],
    });
    await server.start();
    const ask = async (query: string) => {
      const response = await server.executeOperation(
        { query },
        { contextValue: herdcacheContext({ cache, loaders: { user: users } }) },
      );
      type Single = { singleResult: { data: Record<string, string>; extensions: { cache: { response: string } } } };
      const body = (response.body as unknown as Single).singleResult;
      return { data: body.data, outcome: body.extensions.cache.response };
    };
    try {
      for (const [query, tag, change] of [
        ['{ authorName(id: "1") }', 'User:1', () => (db['1'] = 'bob')],
        ['{ title(id: "1") }', 'Post:1', () => (titles['1'] = 'second')],
      ] as const) {
        expect((await ask(query)).outcome).toBe('miss');
        const before = reads;
        expect((await ask(query)).outcome).toBe('hit');
        expect(reads).toBe(before);
        change();
        await cache.invalidateTags([tag]);
        const after = await ask(query);
        expect(after.outcome).toBe('miss');
        expect(Object.values(after.data)[0]).toBe(tag === 'User:1' ? 'bob' : 'second');
      }
    } finally {
      await server.stop();
      await cache.close();
    }
  });
});

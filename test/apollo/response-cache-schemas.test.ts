/**
 * The schema is part of a response's key (a fingerprint of its types, fields and arguments): two
 * servers with different schemas on one cache (a public and an admin API) do not answer an
 * identical query from each other's stored responses; two built from the same SDL (replicas,
 * each building its own schema object) share them.
 */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache, type Cache } from '../../src/core/cache';
import { makeSchema } from '../graphql/fixtures';

const HINTS = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
`;

async function server(cache: Cache, sdl: string, answer: string) {
  const apollo = new ApolloServer({
    schema: makeSchema(`${HINTS}${sdl}`, { Query: { greeting: () => answer } }),
    plugins: [herdcachePlugin({ cache, extensions: true, responseCache: true })],
  });
  await apollo.start();
  const ask = async () => {
    const response = await apollo.executeOperation({ query: '{ greeting }' });
    const result = (
      response.body as unknown as {
        singleResult: { data: { greeting: string }; extensions: { cache: { response: string } } };
      }
    ).singleResult;
    return [result.data.greeting, result.extensions.cache.response];
  };
  return { ask, stop: () => apollo.stop() };
}

it('servers with different schemas on one cache each answer from their own responses', async () => {
  const cache = createCache();
  const publicApi = await server(cache, 'type Query { greeting: String @cacheControl(maxAge: 60) }', 'public');
  const adminApi = await server(
    cache,
    'type Query { greeting: String @cacheControl(maxAge: 60), users: [String] @cacheControl(maxAge: 60) }',
    'admin',
  );
  try {
    expect(await publicApi.ask()).toEqual(['public', 'miss']);
    expect(await adminApi.ask()).toEqual(['admin', 'miss']);
    expect(await publicApi.ask()).toEqual(['public', 'hit']);
    expect(await adminApi.ask()).toEqual(['admin', 'hit']);
  } finally {
    await publicApi.stop();
    await adminApi.stop();
    await cache.close();
  }
});

it('two schemas built from the same SDL (replicas) share their responses', async () => {
  const cache = createCache();
  const sdl = 'type Query { greeting: String @cacheControl(maxAge: 60) }';
  const a = await server(cache, sdl, 'hello');
  const b = await server(cache, sdl, 'hello');
  try {
    expect(await a.ask()).toEqual(['hello', 'miss']);
    expect(await b.ask()).toEqual(['hello', 'hit']);
  } finally {
    await a.stop();
    await b.stop();
    await cache.close();
  }
});

/**
 * A mutation delivered incrementally (@defer, Yoga's useDeferStream) invalidates its result
 * entities as a single-payload mutation does (invalidateViaMutation): it invalidated nothing, so
 * the stored `post(id: "1")` response kept serving the version from before the mutation (a
 * reviewer: hit, version 1, database 2). The deferred payloads are merged into the tree the walk
 * reads, so an entity whose id is in a deferred part is found too. Memory and Redis; counted.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSchema, type GraphQLObjectType } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { MergedPayloads } from '../../src/envelop/incremental';
import { memoryAndRedis } from '../redis/helpers';

const stores = memoryAndRedis('defer-mutation');

function makeServer(store: ReturnType<(typeof stores)[number][1]>) {
  let version = 0;
  let reads = 0;
  const schema = buildSchema(`
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
    type Query { post(id: ID!): Post @cacheControl(maxAge: 60) }
    type Post @cacheControl(maxAge: 60) { id: ID!, version: Int!, comments: Int }
    type Mutation { bumpPost(id: ID!): Post }`);
  schema.getQueryType()!.getFields().post!.resolve = (_p, { id }: { id: string }) => (reads++, { id, version });
  schema.getMutationType()!.getFields().bumpPost!.resolve = (_p, { id }: { id: string }) => ({
    id,
    version: ++version,
  });
  (schema.getType('Post') as GraphQLObjectType).getFields().comments!.resolve = async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return 3;
  };
  const cache = createCache({ ttl: 60_000, ...(store === undefined ? {} : { store }) });
  const yoga = createYoga({
    schema,
    plugins: [useDeferStream(), useHerdcache({ cache, responseCache: true, extensions: true })],
    logging: false,
  });
  const server = createServer((req, res) => void yoga(req, res));
  return {
    cache,
    reads: () => reads,
    version: () => version,
    async start() {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await cache.close();
    },
  };
}

const send = async (url: string, query: string): Promise<string> => {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'multipart/mixed, application/json' },
    body: JSON.stringify({ query }),
  });
  return response.text(); // the whole (multipart) response: the mutation is over
};

describe.each(stores)('a deferred mutation invalidates its entities (%s)', (_name, store) => {
  it.each([
    ['the id in the initial payload', 'mutation { bumpPost(id: "1") { id version ... @defer { comments } } }'],
    ['the id in a deferred payload', 'mutation { bumpPost(id: "1") { comments ... @defer { id version } } }'],
  ])('%s', async (_why, mutation) => {
    const server = makeServer(store());
    const url = await server.start();
    try {
      const read = async () =>
        JSON.parse(await send(url, '{ post(id: "1") { id version } }')) as {
          data: { post: { version: number } };
          extensions: { cache: { response: string } };
        };
      expect((await read()).extensions.cache.response).toBe('miss');
      expect((await read()).extensions.cache.response).toBe('hit');
      const text = await send(url, mutation);
      expect(text).toContain('"hasNext":false'); // delivered incrementally (payloads), not as one result
      const after = await read();
      expect(after.data.post.version).toBe(server.version());
      expect(after.extensions.cache.response).toBe('miss');
      expect(server.reads()).toBe(2);
    } finally {
      await server.stop();
    }
  });
});

describe('MergedPayloads', () => {
  it('merges deferred data and streamed items at their paths, in both payload shapes, as own keys', () => {
    const merged = new MergedPayloads();
    expect(merged.add({ data: { a: { id: '1' }, list: [{ id: 'x' }] }, hasNext: true })).toBe(true);
    expect(
      merged.add({ incremental: [{ data: JSON.parse('{"name":"n","__proto__":{"polluted":true}}'), path: ['a'] }] }),
    ).toBe(true);
    expect(merged.add({ items: [{ id: 'y' }], path: ['list', 1] })).toBe(true); // streamed: the item's own path
    expect(merged.add({ incremental: [{ data: { z: 1 }, path: ['missing', 0] }] })).toBe(false);
    expect(merged.add({ hasNext: false })).toBe(false);
    expect(merged.data).toEqual({
      a: { id: '1', name: 'n', ['__proto__']: { polluted: true } },
      list: [{ id: 'x' }, { id: 'y' }],
    });
    expect(Object.getPrototypeOf(merged.data!.a)).toBe(Object.prototype);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });
});

it('a mutation whose entities arrive in @stream payloads invalidates them (each payload, each tag once)', async () => {
  let version = 0;
  const schema = buildSchema(`
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
    type Query { post(id: ID!): Post @cacheControl(maxAge: 60) }
    type Post @cacheControl(maxAge: 60) { id: ID!, version: Int! }
    type Bumped { posts: [Post!]! }
    type Mutation { bumpAll: Bumped }`);
  schema.getQueryType()!.getFields().post!.resolve = (_p, { id }: { id: string }) => ({ id, version });
  schema.getMutationType()!.getFields().bumpAll!.resolve = () => ({
    posts: (async function* () {
      version++;
      for (let i = 0; i < 3; i++) {
        await new Promise((resolve) => setImmediate(resolve));
        yield { id: String(i), version };
      }
    })(),
  });
  const cache = createCache({ ttl: 60_000 });
  const invalidated: string[][] = [];
  const invalidateTags = cache.invalidateTags.bind(cache);
  cache.invalidateTags = (tags) => (invalidated.push([...tags]), invalidateTags(tags));
  const yoga = createYoga({
    schema,
    plugins: [useDeferStream(), useHerdcache({ cache, responseCache: true, extensions: true })],
    logging: false,
  });
  const ask = async (query: string, accept = 'application/json') =>
    (
      await yoga.fetch('http://127.0.0.1/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept },
        body: JSON.stringify({ query }),
      })
    ).text();
  const read = async () =>
    JSON.parse(await ask('{ post(id: "1") { id version } }')) as {
      data: { post: { version: number } };
      extensions: { cache: { response: string } };
    };
  try {
    expect((await read()).extensions.cache.response).toBe('miss');
    expect((await read()).extensions.cache.response).toBe('hit');
    const text = await ask('mutation { bumpAll { posts @stream(initialCount: 0) { id version } } }', 'multipart/mixed');
    expect(text).toContain('"path":["bumpAll","posts",1]'); // Post 1 came in a streamed payload
    const after = await read();
    expect({ version: after.data.post.version, response: after.extensions.cache.response }).toEqual({
      version: 1,
      response: 'miss',
    });
    expect(invalidated.flat().sort()).toEqual(['Post:0', 'Post:1', 'Post:2']); // each once
  } finally {
    await cache.close();
  }
});

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
import { deferred } from '../helpers';

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
  it('gives each part as a sparse tree at its path (with the scalars of the objects on the way), in both shapes, as own keys', () => {
    const merged = new MergedPayloads();
    expect(merged.add({ data: { a: { id: '1', b: { id: '2' } }, list: [{ id: 'x' }] }, hasNext: true })).toEqual([
      { a: { id: '1', b: { id: '2' } }, list: [{ id: 'x' }] },
    ]);
    expect(
      merged.add({ incremental: [{ data: JSON.parse('{"name":"n","__proto__":{"polluted":true}}'), path: ['a'] }] }),
    ).toEqual([{ a: { id: '1', name: 'n', ['__proto__']: { polluted: true } } }]);
    const streamed = merged.add({ items: [{ id: 'y' }], path: ['list', 1] }); // the item's own path
    expect(streamed).toHaveLength(1);
    expect((streamed[0]!.list as unknown[])[1]).toEqual({ id: 'y' });
    expect(merged.add({ incremental: [{ data: { z: 1 }, path: ['missing', 0] }] })).toEqual([]);
    expect(merged.add({ hasNext: false })).toEqual([]);
    expect(merged.data).toEqual({
      a: { id: '1', b: { id: '2' }, name: 'n', ['__proto__']: { polluted: true } },
      list: [{ id: 'x' }, { id: 'y' }],
    });
    expect(Object.getPrototypeOf(merged.data!.a)).toBe(Object.prototype);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });
});

it('an entity a deferred payload changes again is invalidated again (a read between payloads stored the state in between)', async () => {
  let count = 0;
  const gate = deferred<void>();
  const schema = buildSchema(`
    enum CacheControlScope { PUBLIC PRIVATE }
    directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
    type Query { list(id: ID!): TodoList @cacheControl(maxAge: 60) }
    type TodoList @cacheControl(maxAge: 60) { id: ID!, count: Int! }
    type Todo { id: ID!, list: TodoList!, again: Todo }
    type Mutation { addTodo: Todo }`);
  schema.getQueryType()!.getFields().list!.resolve = (_p, { id }: { id: string }) => ({ id, count });
  schema.getMutationType()!.getFields().addTodo!.resolve = () => (count++, { id: 't1', list: { id: 'L', count } });
  (schema.getType('Todo') as GraphQLObjectType).getFields().again!.resolve = async () => {
    await gate.promise;
    count++;
    return { id: 't2', list: { id: 'L', count } };
  };
  const cache = createCache({ ttl: 60_000 });
  const yoga = createYoga({
    schema,
    plugins: [useDeferStream(), useHerdcache({ cache, responseCache: true, extensions: true })],
    logging: false,
  });
  const post = (query: string, accept = 'application/json') =>
    yoga.fetch('http://127.0.0.1/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: JSON.stringify({ query }),
    });
  const read = async () =>
    JSON.parse(await (await post('{ list(id: "L") { id count } }')).text()) as {
      data: { list: { count: number } };
      extensions: { cache: { response: string } };
    };
  try {
    expect((await read()).data.list.count).toBe(0);
    const response = await post(
      'mutation { addTodo { id list { id count } ... @defer { again { id list { id count } } } } }',
      'multipart/mixed',
    );
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('"t1"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect((await read()).data.list.count).toBe(1); // between the payloads: stored
    gate.resolve();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text).toContain('"t2"');
    const after = await read();
    expect({ count: after.data.list.count, response: after.extensions.cache.response }).toEqual({
      count: 2,
      response: 'miss',
    });
  } finally {
    await cache.close();
  }
});

it('a mutation whose entities arrive in @stream payloads invalidates them, each as its payload leaves', async () => {
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
    expect(invalidated.flat().sort()).toEqual(['Post:0', 'Post:1', 'Post:2']); // each item's entity, as it leaves
  } finally {
    await cache.close();
  }
});

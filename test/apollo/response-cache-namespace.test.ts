/**
 * Response entries live in the response namespace (`\0response\0…`, see core/namespaces): no key an
 * app passes to getOrCompute or a loader, whatever it is built from, reads a stored response or
 * plants one (a raw key spelling a response's key used to return its data, and to poison it).
 */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { RESPONSE_KEY_HEAD } from '../../src/graphql/response-cache';
import { responseFixture } from '../graphql/response-fixture';

async function setUp() {
  // The memory store, recording the keys written to it.
  const store = memoryStore();
  const writtenKeys = new Set<string>();
  const setMany = store.setMany.bind(store);
  store.setMany = (writes) => {
    for (const write of writes) writtenKeys.add(write.key);
    return setMany(writes);
  };
  const f = responseFixture({ cache: createCache({ store }) });
  const server = new ApolloServer<{ session?: string }>({
    schema: f.schema,
    plugins: [
      herdcachePlugin<{ session?: string }>({
        cache: f.cache,
        extensions: true,
        responseCache: { sessionId: (ctx) => ctx.session },
      }),
    ],
  });
  await server.start();
  const query = async (source: string, session = 'alice') => {
    const response = await server.executeOperation({ query: source }, { contextValue: { session } });
    if (response.body.kind !== 'single') throw new Error('expected a single result');
    return response.body.singleResult as { data?: any; extensions?: { cache?: { response?: string } } };
  };
  const responseKeys = () => [...writtenKeys].filter((key) => key.startsWith(RESPONSE_KEY_HEAD));
  return { f, server, query, responseKeys };
}

it('response keys start with the reserved namespace head', async () => {
  const { server, query, responseKeys } = await setUp();
  try {
    await query('{ me { id name } }');
    await query('{ products { id name } }');
    const keys = responseKeys();
    expect(keys).toHaveLength(2);
    for (const key of keys) expect(key.startsWith('\u0000response\u0000')).toBe(true);
  } finally {
    await server.stop();
  }
});

it("getOrCompute cannot read a stored response (another session's PRIVATE one included), nor plant one", async () => {
  const { f, server, query, responseKeys } = await setUp();
  try {
    expect((await query('{ me { id name } }', 'alice')).data).toEqual({ me: { id: 's-alice', name: 'viewer alice' } });
    const [key] = responseKeys();
    expect(key).toBeDefined();
    const fill = jest.fn(() => ({
      data: { me: { id: 's-alice', name: 'poison' } },
      maxAge: 60,
      scope: 'PRIVATE',
      at: 0,
    }));
    await expect(f.cache.getOrCompute(key!, fill)).rejects.toMatchObject({ code: 'E_INVALID_KEY' });
    await expect(f.cache.getOrCompute(key!, fill, { ttl: 60_000 })).rejects.toMatchObject({ code: 'E_INVALID_KEY' });
    await expect(f.cache.request().getOrCompute(key!, fill)).rejects.toMatchObject({ code: 'E_INVALID_KEY' });
    // The key without its leading mark (what a raw key could spell) is another key: the raw write
    // lands beside the response, never on it.
    expect(await f.cache.getOrCompute(key!.slice(1), fill, { ttl: 60_000 })).toMatchObject({
      data: { me: { name: 'poison' } },
    });
    expect(fill).toHaveBeenCalledTimes(1);
    const again = await query('{ me { id name } }', 'alice');
    expect(again.data).toEqual({ me: { id: 's-alice', name: 'viewer alice' } });
    expect(again.extensions?.cache?.response).toBe('hit');
    expect(f.calls['me:alice']).toBe(1);
  } finally {
    await server.stop();
  }
});

it('no loader name or loader key reaches a response entry', async () => {
  const { f, server, query, responseKeys } = await setUp();
  try {
    await query('{ products { id name } }');
    const [key] = responseKeys();
    expect(() =>
      f.cache.loader({ name: '\u0000response\u0000', batch: async (keys: readonly string[]) => keys }),
    ).toThrow(/option "name"/);
    // A loader's store keys are `name:key`, its name never starts with U+0000: a key spelling the
    // response's lands in the loader's own space, whatever its name.
    const batch = jest.fn(async (keys: readonly string[]) => keys.map(() => 'from the loader'));
    const loader = f.cache.loader({ name: 'response', batch, ttl: 60_000 });
    expect(await loader.load(key!)).toBe('from the loader');
    expect(await loader.load(key!.slice(RESPONSE_KEY_HEAD.length))).toBe('from the loader');
    expect(batch).toHaveBeenCalledTimes(2);
    const again = await query('{ products { id name } }');
    expect(again.data).toEqual({ products: [{ id: 'p1', name: 'Pen' }] });
    expect(again.extensions?.cache?.response).toBe('hit');
    expect(f.calls.products).toBe(1);
  } finally {
    await server.stop();
  }
});

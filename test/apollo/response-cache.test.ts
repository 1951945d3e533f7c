/** The response layer on Apollo Server 5 over HTTP, with the memory store and with Redis. */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { useHerdcache } from '../../src/envelop/plugin';
import { createCache } from '../../src/core/cache';
import type { Store } from '../../src/core/store';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import { manualClock } from '../../src/core/freshness';
import { expectReasons, post, responseFixture, until, type ResponseFixture } from '../graphql/response-fixture';
import { memoryAndRedis } from '../redis/helpers';

async function serve(
  f: ResponseFixture,
  responseCache: true | ResponseCacheOptions = { sessionId: (ctx) => ctx.session },
) {
  const server = new ApolloServer({
    schema: f.schema,
    plugins: [herdcachePlugin({ cache: f.cache, extensions: true, responseCache })],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) =>
      typeof req.headers['x-session'] === 'string' ? { session: req.headers['x-session'] } : {},
  });
  return { url, stop: () => server.stop() };
}

const stores = memoryAndRedis('resp');

describe.each(stores)('Apollo response cache (%s store)', (_name, store) => {
  it('N concurrent identical operations: one execution; the others are coalesced, then hits', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const N = 50;
      const pending = Array.from({ length: N }, () => post(url, '{ slow }'));
      await until(() => f.calls.slow === 1, 'the first execution');
      // Let every request reach the cache before the execution ends.
      await new Promise((resolve) => setTimeout(resolve, 50));
      f.gate.open();
      const responses = await Promise.all(pending);
      expect(f.calls.slow).toBe(1);
      const outcomes = responses.map((r) => r.body.extensions?.cache?.response);
      expect(outcomes.filter((o) => o === 'miss')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'coalesced' || o === 'hit')).toHaveLength(N - 1);
      for (const r of responses) expect(r.body.data).toEqual({ slow: 7 });
      const again = await post(url, '{ slow }');
      expect(again.body.extensions?.cache?.response).toBe('hit');
      expect(again.headers.get('cache-control')).toBe('max-age=60, public');
      expect(again.headers.get('age')).not.toBeNull();
      expect(f.calls.slow).toBe(1);
    } finally {
      await stop();
    }
  });

  it('PRIVATE is never served across sessions, and is cached per session', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const a1 = await post(url, '{ me { id name } }', { session: 'a' });
      const b1 = await post(url, '{ me { id name } }', { session: 'b' });
      const a2 = await post(url, '{ me { id name } }', { session: 'a' });
      const none = await post(url, '{ me { id name } }');
      expect(a1.body.data.me.name).toBe('viewer a');
      expect(b1.body.data.me.name).toBe('viewer b');
      expect(a2.body.data.me.name).toBe('viewer a');
      expect(a2.body.extensions?.cache?.response).toBe('hit');
      expect(b1.body.extensions?.cache?.response).toBe('miss');
      expect(none.body.extensions?.cache?.response).toBe('bypassed');
      expect(f.calls['me:a']).toBe(1);
      expect(f.calls['me:b']).toBe(1);
    } finally {
      await stop();
    }
  });

  it('a dynamic PRIVATE hint: not stored, and concurrent joiners execute themselves', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const [x, y] = await Promise.all([
        post(url, '{ dynamicPrivate }', { session: 'a' }),
        post(url, '{ dynamicPrivate }', { session: 'b' }),
      ]);
      expect(x.body.data).toEqual({ dynamicPrivate: 1 });
      expect(y.body.data).toEqual({ dynamicPrivate: 1 });
      expect(f.calls.dynamicPrivate).toBe(2);
      await post(url, '{ dynamicPrivate }', { session: 'a' });
      expect(f.calls.dynamicPrivate).toBe(3);
    } finally {
      await stop();
    }
  });

  it('setResponseCacheHint (herdcache/graphql) restricts as setCacheHint does: PRIVATE not stored, a shorter maxAge stored for that long', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const a = await post(url, '{ viewerHinted }', { session: 'a' });
      expect(a.headers.get('cache-control')).toBe('max-age=60, private');
      expect((await post(url, '{ viewerHinted }', { session: 'b' })).body.data).toEqual({ viewerHinted: 'viewer b' });
      expect(f.calls.viewerHinted).toBe(2);
      expect((await post(url, '{ hintedShort }')).headers.get('cache-control')).toBe('max-age=5, public');
      const again = await post(url, '{ hintedShort }');
      expect(again.body.extensions?.cache?.response).toBe('hit');
      expect(again.headers.get('cache-control')).toBe('max-age=5, public');
      expect(f.calls.hintedShort).toBe(1);
    } finally {
      await stop();
    }
  });

  it('a mutation with @invalidates, a mutation result entity, and cache.invalidateTags: the next read is fresh', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const read = async () => (await post(url, '{ user(id: "1") { id name } }')).body;
      expect((await read()).data.user.name).toBe('Ada');
      expect((await read()).extensions?.cache?.response).toBe('hit');
      await post(url, 'mutation { renameUser(id: "1", name: "Ada2") { name } }');
      const afterTag = await read();
      expect(afterTag.data.user.name).toBe('Ada2');
      expect(afterTag.extensions?.cache?.response).toBe('miss');
      // A result entity without any @invalidates: User:1 is in the mutation's result.
      await post(url, 'mutation { renameUserEntity(id: "1", name: "Ada3") { id name } }');
      expect((await read()).data.user.name).toBe('Ada3');
      // Nothing in the result names the user: only an explicit invalidation reaches it.
      await post(url, 'mutation { renameUserQuietly(id: "1", name: "Ada4") }');
      expect((await read()).data.user.name).toBe('Ada3');
      await f.cache.invalidateTags(['User:1']);
      expect((await read()).data.user.name).toBe('Ada4');
    } finally {
      await stop();
    }
  });

  it('a response with errors is not cached', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const first = await post(url, '{ broken }');
      expect(first.body.errors).toHaveLength(1);
      await post(url, '{ broken }');
      expect(f.calls.broken).toBe(2);
    } finally {
      await stop();
    }
  });

  it('says why it did not cache: bypassReason (not looked up) and notStoredReason (executed, not stored)', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      await expectReasons(url);
    } finally {
      await stop();
    }
  });

  it('operations without hints, and mutations, are bypassed', async () => {
    const f = responseFixture({ store: store() });
    const { url, stop } = await serve(f);
    try {
      const r = await post(url, '{ uncached }');
      await post(url, '{ uncached }');
      expect(r.body.extensions?.cache?.response).toBe('bypassed');
      expect(f.calls.uncached).toBe(2);
      // @cached alone caps a maxAge, it grants none (the Cache-Control header agrees): the field layer caches it.
      expect((await post(url, '{ onlyCached }')).body.extensions?.cache?.response).toBe('bypassed');
      const m = await post(url, 'mutation { renameUserQuietly(id: "2", name: "B") }');
      expect(m.body.extensions?.cache?.response).toBe('bypassed');
    } finally {
      await stop();
    }
  });
});

describe('Apollo response cache: SWR and a store that is down', () => {
  it('SWR: an expired response is served stale at once while one execution refreshes it', async () => {
    const clock = manualClock();
    const f = responseFixture({ cache: createCache({ clock }) });
    const { url, stop } = await serve(f, { swr: 60 });
    try {
      expect((await post(url, '{ fresh }')).body.data).toEqual({ fresh: 1 });
      clock.advance(31_000); // past maxAge 30, within swr 60
      const first = await post(url, '{ fresh }');
      expect(first.body.data).toEqual({ fresh: 1 });
      expect(first.body.extensions?.cache?.response).toBe('stale');
      const more = await Promise.all([post(url, '{ fresh }'), post(url, '{ fresh }'), post(url, '{ fresh }')]);
      for (const r of more) expect([1, 2]).toContain(r.body.data.fresh);
      await until(() => f.calls.fresh === 2, 'the refresh');
      const after = await post(url, '{ fresh }');
      expect(after.body.data).toEqual({ fresh: 2 });
      expect(after.body.extensions?.cache?.response).toBe('hit');
      expect(f.calls.fresh).toBe(2); // one refresh for all the stale reads
      clock.advance(200_000); // past the grace: a miss, executed
      expect((await post(url, '{ fresh }')).body.extensions?.cache?.response).toBe('miss');
      expect(f.calls.fresh).toBe(3);
    } finally {
      await stop();
    }
  });

  it('the cache down: operations are still answered', async () => {
    const failing: Store = {
      name: 'down',
      getMany: () => Promise.reject(new Error('down')),
      setMany: () => Promise.reject(new Error('down')),
      delete: () => Promise.reject(new Error('down')),
      clear: () => Promise.reject(new Error('down')),
      invalidateTags: () => Promise.reject(new Error('down')),
    };
    const f = responseFixture({ store: failing });
    const { url, stop } = await serve(f);
    try {
      const responses = await Promise.all([
        post(url, '{ user(id: "2") { id name } }'),
        post(url, '{ user(id: "2") { id name } }'),
      ]);
      for (const r of responses) expect(r.body.data).toEqual({ user: { id: '2', name: 'Bob' } });
      const m = await post(url, 'mutation { renameUserEntity(id: "2", name: "Bo") { id name } }');
      expect(m.body.data.renameUserEntity.name).toBe('Bo');
      expect((await post(url, '{ user(id: "2") { id name } }')).body.data.user.name).toBe('Bo');
    } finally {
      await stop();
    }
  });

  it('counts outcomes per operation in herdcache_responses_total', async () => {
    const { Registry } = await import('prom-client');
    const registry = new Registry();
    const f = responseFixture();
    const server = new ApolloServer({
      schema: f.schema,
      plugins: [herdcachePlugin({ cache: f.cache, registry, responseCache: true })],
    });
    const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } });
    try {
      await post(url, 'query Products { products { id name } }');
      await post(url, 'query Products { products { id name } }');
      await post(url, '{ uncached }');
      const text = await registry.metrics();
      expect(text).toContain('herdcache_responses_total{operation="Products",outcome="miss"} 1');
      expect(text).toContain('herdcache_responses_total{operation="Products",outcome="hit"} 1');
      expect(text).toContain('herdcache_responses_total{operation="anonymous",outcome="bypassed"} 1');
    } finally {
      await server.stop();
    }
  });

  it('refuses bad options, naming them', () => {
    const cache = createCache();
    for (const maxBytes of [-1, 0, 1.5, Infinity, 1e20, NaN, '1000'])
      expect(() => herdcachePlugin({ cache, responseCache: { maxBytes: maxBytes as number } })).toThrow(
        /option "responseCache.maxBytes" must be a positive integer number of bytes/,
      );
    // The cache is checked before the response layer reads it, as without it.
    for (const bad of [undefined, null, {}, 'cache'])
      for (const make of [
        () => herdcachePlugin({ cache: bad as never, responseCache: true }),
        () => useHerdcache({ cache: bad as never, responseCache: true }),
      ])
        expect(make).toThrow(/option "cache" must be a cache created with createCache\(\)/);
    expect(() => herdcachePlugin({ cache, responseCache: { sesionId: () => 'x' } as never })).toThrow(/sesionId/);
    // Objects that hold no options are refused naming responseCache, never taken as {}.
    for (const odd of [[], new Map([['maxBytes', 1]]), new Date(0), /x/, 'yes', 1, null])
      expect(() => herdcachePlugin({ cache, responseCache: odd as never })).toThrow(
        /option "responseCache" .*true or an options object/,
      );
  });
});

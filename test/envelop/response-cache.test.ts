/** The response layer on GraphQL Yoga 5 (useHerdcache) over HTTP, with the memory store and with Redis. */
import type { Plugin } from 'graphql-yoga';
import { useHerdcache } from '../../src/envelop/plugin';
import { setResponseCacheHint } from '../../src/graphql';
import { createCache } from '../../src/core/cache';
import type { Store } from '../../src/core/store';
import { manualClock } from '../../src/core/freshness';
import { expectReasons, post, responseFixture, until } from '../graphql/response-fixture';
import { memoryAndRedis } from '../redis/helpers';
import { serveYoga } from './serve';

const serve = serveYoga;

const stores = memoryAndRedis('resp');

describe.each(stores)('Yoga response cache (%s store)', (_name, store) => {
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

describe('Yoga response cache: the Cache-Control header (as Apollo writes it) and runtime hints', () => {
  it('a miss and a hit say the policy (a hit with its age); PRIVATE says private', async () => {
    const clock = manualClock();
    const f = responseFixture({ cache: createCache({ clock }) });
    const { url, stop } = await serve(f);
    try {
      const miss = await post(url, '{ products { id } }');
      expect(miss.body.extensions?.cache?.response).toBe('miss');
      expect(miss.headers.get('cache-control')).toBe('max-age=60, public'); // the field's 60, not Product's 120
      expect(miss.headers.get('age')).toBeNull();
      clock.advance(20_000);
      const hit = await post(url, '{ products { id } }');
      expect(hit.body.extensions?.cache?.response).toBe('hit');
      expect(hit.headers.get('cache-control')).toBe('max-age=60, public');
      expect(hit.headers.get('age')).toBe('20'); // an HTTP cache keeps it 40 s more, not 60
      const mine = await post(url, '{ me { id } }', { session: 'a' });
      expect(mine.headers.get('cache-control')).toBe('max-age=60, private');
      expect((await post(url, '{ me { id } }', { session: 'a' })).headers.get('cache-control')).toBe(
        'max-age=60, private',
      );
      // PRIVATE without a session: not cached here, but the header still says what the schema does.
      expect((await post(url, '{ me { id } }')).headers.get('cache-control')).toBe('max-age=60, private');
    } finally {
      await stop();
    }
  });

  it('no-store for what is not cacheable: no hint, a mutation, errors', async () => {
    const f = responseFixture();
    const { url, stop } = await serve(f);
    try {
      expect((await post(url, '{ uncached }')).headers.get('cache-control')).toBe('no-store');
      expect((await post(url, 'mutation { renameUserQuietly(id: "2", name: "B") }')).headers.get('cache-control')).toBe(
        'no-store',
      );
      expect((await post(url, '{ broken }')).headers.get('cache-control')).toBe('no-store');
    } finally {
      await stop();
    }
  });

  it('a header set before is left as it is', async () => {
    const f = responseFixture();
    const mine: Plugin = { onResponse: ({ response }) => response.headers.set('cache-control', 'max-age=5') };
    const { url, stop } = await serve(f, true, [mine]);
    try {
      expect((await post(url, '{ products { id } }')).headers.get('cache-control')).toBe('max-age=5');
    } finally {
      await stop();
    }
  });

  it('setResponseCacheHint: a stricter result is served with its own header, and neither stored nor shared', async () => {
    const f = responseFixture();
    const { url, stop } = await serve(f);
    try {
      const a = await post(url, '{ viewerHinted }', { session: 'a' });
      expect(a.body.data).toEqual({ viewerHinted: 'viewer a' });
      expect(a.headers.get('cache-control')).toBe('max-age=60, private');
      const b = await post(url, '{ viewerHinted }', { session: 'b' });
      expect(b.body.data).toEqual({ viewerHinted: 'viewer b' }); // not a's, stored under the PUBLIC key
      expect(f.calls.viewerHinted).toBe(2);
      // Concurrent joiners of one execution that turns out PRIVATE execute themselves.
      const joined = await Promise.all(['c', 'd', 'e'].map((session) => post(url, '{ viewerHinted }', { session })));
      expect(joined.map((r) => r.body.data.viewerHinted)).toEqual(['viewer c', 'viewer d', 'viewer e']);
      // A shorter maxAge: the header says it, and it is stored for that long (as Apollo's response cache does).
      const short = await post(url, '{ hintedShort }');
      expect(short.headers.get('cache-control')).toBe('max-age=5, public');
      const again = await post(url, '{ hintedShort }');
      expect(again.body.extensions?.cache?.response).toBe('hit');
      expect(again.headers.get('cache-control')).toBe('max-age=5, public');
      expect(f.calls.hintedShort).toBe(1);
    } finally {
      await stop();
    }
  });
});

describe('Yoga response cache: SWR and a store that is down', () => {
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

  it('refuses bad options, naming them', () => {
    const cache = createCache();
    expect(() => useHerdcache({ cache, responseCache: { maxBytes: -1 } })).toThrow(/responseCache.maxBytes/);
    expect(() => useHerdcache({ cache, responseCache: { sesionId: () => 'x' } as never })).toThrow(/sesionId/);
    expect(() => setResponseCacheHint({}, { maxAge: -1 })).toThrow(/"maxAge"/);
    expect(() => setResponseCacheHint({}, { scope: 'private' as never })).toThrow(/"scope"/);
    expect(() => setResponseCacheHint({}, { maxage: 1 } as never)).toThrow(/maxage/);
    expect(() => setResponseCacheHint(null as never, {})).toThrow(/context/);
  });
});

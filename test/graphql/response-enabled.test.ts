/**
 * responseCache.enabled (Envelop's `enabled`, Apollo's shouldReadFromCache/shouldWriteToCache):
 * a request it answers false for is executed on its own, over HTTP on Apollo 5 and Yoga 5. It
 * reads no response, joins no execution, stores nothing; the other requests are cached as before;
 * a mutation still invalidates; an answer that is no boolean, or a throw, bypasses that request
 * (warned of once), never fails it.
 */
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import { serveApollo } from '../apollo/serve';
import { serveYoga } from '../envelop/serve';
import { captureWarnings } from '../helpers';
import { post, responseFixture, until, type ResponseFixture } from './response-fixture';

type Context = { session?: string };

const serve = (kind: 'apollo' | 'yoga', f: ResponseFixture, responseCache: ResponseCacheOptions<Context>) =>
  kind === 'yoga' ? serveYoga(f, responseCache as ResponseCacheOptions) : serveApollo(f.schema, f.cache, responseCache);

const warnings = captureWarnings();

describe.each(['apollo', 'yoga'] as const)('%s: responseCache.enabled', (kind) => {
  it('false: executed alone (no read, no join, nothing stored); the others share one execution, then hit', async () => {
    const f = responseFixture();
    const asked: (string | undefined)[] = [];
    const { url, stop } = await serve(kind, f, {
      enabled: (ctx) => {
        asked.push(ctx.session);
        return ctx.session !== 'admin';
      },
    });
    try {
      // 4 requests share one execution of `slow`; 3 admin requests each execute, though it is in flight.
      const shared = Array.from({ length: 4 }, () => post(url, '{ slow }'));
      await until(() => f.calls.slow === 1, 'the shared execution');
      const apart = Array.from({ length: 3 }, () => post(url, '{ slow }', { session: 'admin' }));
      await until(() => f.calls.slow === 4, 'the admin executions');
      f.gate.open();
      const outcomes = (await Promise.all(shared)).map((r) => r.body.extensions?.cache?.response).sort();
      expect(outcomes).toEqual(['coalesced', 'coalesced', 'coalesced', 'miss']);
      for (const r of await Promise.all(apart)) {
        expect(r.body.data).toEqual({ slow: 7 });
        expect(r.body.extensions?.cache).toMatchObject({ response: 'bypassed', bypassReason: 'disabled' });
      }
      expect(f.calls.slow).toBe(4);
      // The stored response answers the others; an admin request still executes.
      expect((await post(url, '{ slow }')).body.extensions?.cache?.response).toBe('hit');
      const admin = await post(url, '{ slow }', { session: 'admin' });
      expect(admin.body.extensions?.cache).toMatchObject({ response: 'bypassed', bypassReason: 'disabled' });
      expect(f.calls.slow).toBe(5);
      // Asked for cacheable queries only: not for an operation without a hint, nor a mutation.
      const before = asked.length;
      await post(url, '{ uncached }');
      await post(url, 'mutation { renameUser(id: "1", name: "Al") { id name } }', { session: 'admin' });
      expect(asked.length).toBe(before);
      expect(warnings).toEqual([]);
    } finally {
      await stop();
    }
  });

  it('a mutation by a request it is disabled for still invalidates the stored responses', async () => {
    const f = responseFixture();
    const { url, stop } = await serve(kind, f, { enabled: (ctx) => ctx.session !== 'admin' });
    try {
      const read = () => post(url, '{ user(id: "1") { id name } }');
      expect((await read()).body.data).toEqual({ user: { id: '1', name: 'Ada' } });
      expect((await read()).body.extensions?.cache?.response).toBe('hit');
      await post(url, 'mutation { renameUser(id: "1", name: "Al") { id name } }', { session: 'admin' });
      const after = await read();
      expect(after.body.data).toEqual({ user: { id: '1', name: 'Al' } });
      expect(after.body.extensions?.cache?.response).toBe('miss');
    } finally {
      await stop();
    }
  });

  it.each<[string, (ctx: Context) => unknown, RegExp]>([
    ['undefined', () => undefined, /returned undefined: it must return true or false/],
    ['a string', () => 'yes', /returned "yes": it must return true or false/],
    ['a Promise', async () => true, /returned a Promise: it must answer synchronously/],
    [
      'a throw',
      () => {
        throw new Error('no role header');
      },
      /threw \(no role header\)/,
    ],
  ])('answering %s: executed (200), bypassed (enabled_failed), warned of once', async (_label, enabled, message) => {
    const f = responseFixture();
    const { url, stop } = await serve(kind, f, { enabled: enabled as (ctx: Context) => boolean });
    try {
      for (let i = 0; i < 2; i++) {
        const r = await post(url, '{ products { id } }');
        expect(r.status).toBe(200);
        expect(r.body.data).toEqual({ products: [{ id: 'p1' }] });
        expect(r.body.extensions?.cache).toMatchObject({ response: 'bypassed', bypassReason: 'enabled_failed' });
      }
      expect(f.calls.products).toBe(2);
      expect(warnings.map((w) => w.code)).toEqual(['HERDCACHE_ENABLED']);
      expect(warnings[0]!.message).toContain('"responseCache.enabled"');
      expect(warnings[0]!.message).toMatch(message);
    } finally {
      await stop();
    }
  });
});

it('refuses an enabled that is no function, naming it', () => {
  const cache = createCache();
  for (const enabled of [true, false, 'yes', 1, {}])
    for (const make of [
      () => herdcachePlugin({ cache, responseCache: { enabled: enabled as never } }),
      () => useHerdcache({ cache, responseCache: { enabled: enabled as never } }),
    ])
      expect(make).toThrow(/option "responseCache.enabled" must be a function of the context returning a boolean/);
});

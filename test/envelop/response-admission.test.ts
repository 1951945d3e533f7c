/**
 * The response layer's admission (src/graphql/response-admission) on GraphQL Yoga 5 (useHerdcache)
 * over HTTP, as test/apollo/response-admission.test.ts on Apollo: once `unreadLimit` responses of an
 * operation were stored in a row and none was read, only 1 in `unreadLimit` of its misses is stored
 * (`notStoredReason: 'not_admitted'`), until a response of it is read. Yoga's parser cache keeps
 * parsed documents, so one query text asked with distinct variables is one operation.
 */
import { useHerdcache } from '../../src/envelop/plugin';
import { createCache } from '../../src/core/cache';
import { post, responseFixture, type Posted } from '../graphql/response-fixture';
import { serveYoga } from './serve';

/** One operation (one query text: one parsed document on the server), asked per user id. */
const USER = 'query User($id: ID!) { user(id: $id) { id name } }';

/** Users 1..20, so every id asked has an answer (and its own resolver count, `user:<id>`). */
const manyNames = () => new Map(Array.from({ length: 20 }, (_, i) => [String(i + 1), `user ${i + 1}`]));

/** What the response layer reported: `miss` (stored), `miss:not_admitted`, `hit`… */
function outcomeOf(r: Posted): string {
  const cache = r.body.extensions?.cache as { response?: string; notStoredReason?: string } | undefined;
  return cache?.notStoredReason === undefined ? String(cache?.response) : `${cache.response}:${cache.notStoredReason}`;
}

describe('Yoga response admission', () => {
  it('unreadLimit 2: after 2 unread stores, 1 in 2 misses is stored, then 1 in 4 (not_admitted); a hit stores every miss again', async () => {
    const f = responseFixture({ names: manyNames() });
    const { url, stop } = await serveYoga(f, { unreadLimit: 2 });
    const ask = async (id: number) => {
      const r = await post(url, USER, { variables: { id: String(id) } });
      expect(r.body.errors).toBeUndefined();
      expect(r.body.data).toEqual({ user: { id: String(id), name: `user ${id}` } });
      return outcomeOf(r);
    };
    const askAll = async (ids: number[]) => {
      const outcomes: string[] = [];
      for (const id of ids) outcomes.push(await ask(id));
      return outcomes;
    };
    try {
      // 2 stored in a row, unread: then 1 in 2 misses is stored, then 1 in 4 (the sample grows rarer, none read).
      expect(await askAll([1, 2, 3, 4, 5, 6, 7, 8])).toEqual([
        'miss', 'miss', 'miss:not_admitted', 'miss', 'miss:not_admitted', 'miss:not_admitted', 'miss:not_admitted', 'miss',
      ]); // prettier-ignore
      for (let id = 1; id <= 8; id++) expect(f.calls[`user:${id}`]).toBe(1);
      // Not stored: a miss again (executed again), stored this time: asked a second time.
      expect(await ask(3)).toBe('miss');
      expect(f.calls['user:3']).toBe(2);
      // Stored: a hit (not executed again). That read ends the skipping.
      expect(await ask(4)).toBe('hit');
      expect(f.calls['user:4']).toBe(1);
      // Every miss stored again, until 2 more in a row are unread.
      expect(await askAll([9, 10, 11])).toEqual(['miss', 'miss', 'miss:not_admitted']);
      // 9 was stored (a hit: read again), so 11, skipped just before, is stored now.
      expect(await askAll([9, 11, 11])).toEqual(['hit', 'miss', 'hit']);
      expect(f.calls['user:9']).toBe(1);
      expect(f.calls['user:11']).toBe(2);
    } finally {
      await stop();
    }
  });

  it('refuses unreadLimit 0 through useHerdcache, naming responseCache.unreadLimit', () => {
    const cache = createCache();
    expect(() => useHerdcache({ cache, responseCache: { unreadLimit: 0 } })).toThrow(
      'option "responseCache.unreadLimit" must be false or an integer from 1 to 1e9, got 0',
    );
    for (const unreadLimit of [1, 1e9, false] as const)
      expect(() => useHerdcache({ cache, responseCache: { unreadLimit } })).not.toThrow();
  });
});

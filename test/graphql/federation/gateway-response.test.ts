/**
 * The response layer on a gateway (Apollo Server with `gateway`): the gateway executes through its
 * query planner, which a plugin cannot call, and its API schema has no resolvers. So a response is
 * never run apart there: a background refresh run on the API schema locally answered
 * `{ product: null }` and stored it, served to everyone until it expired. On a gateway a stale
 * response is served, not refreshed apart; the first request after its grace executes it.
 */
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { herdcachePlugin } from '../../../src/apollo';
import { createCache } from '../../../src/core/cache';
import { manualClock } from '../../../src/core/freshness';
import { post, startFederation } from './fixtures';

const QUERY = '{ product(id: "3") { id name } }';

it('a stale gateway response is not refreshed apart (it stored nulls); it stays what the gateway answered', async () => {
  const clock = manualClock();
  const gatewayCache = createCache({ clock });
  const federation = await startFederation(
    createCache(),
    undefined,
    [
      ApolloServerPluginCacheControl({ defaultMaxAge: 10 }),
      herdcachePlugin({ cache: gatewayCache, extensions: true, responseCache: { defaultMaxAge: 10, swr: 60 } }),
    ],
    10, // the subgraphs' responses say max-age=10: the gateway's policy is cacheable
  );
  type Answer = { data?: { product: { id: string; name: string } | null }; extensions?: any };
  const ask = async () => (await post(federation.gatewayUrl, QUERY)) as Answer;
  try {
    const first = await ask();
    expect(first.data).toEqual({ product: { id: '3', name: 'product 3' } });
    expect(first.extensions.cache).toMatchObject({ response: 'miss' });
    expect(first.extensions.cache.notStoredReason).toBeUndefined();
    clock.advance(11_000); // stale, within swr
    const stale = await ask();
    expect(stale.extensions.cache.response).toBe('stale');
    expect(stale.data).toEqual(first.data);
    for (let i = 0; i < 50 && gatewayCache.inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10));
    const after = await ask();
    expect(after.data).toEqual({ product: { id: '3', name: 'product 3' } });
  } finally {
    await federation.stop();
    await gatewayCache.close();
  }
});

it('subgraphs answering no-store: not stored on the gateway (stricter_hint), and no defaultMaxAge advice', async () => {
  const warned: string[] = [];
  const spy = jest.spyOn(process, 'emitWarning').mockImplementation(((warning: string, options?: { code?: string }) => {
    warned.push(options?.code ?? String(warning));
  }) as typeof process.emitWarning);
  const gatewayCache = createCache();
  const federation = await startFederation(createCache(), undefined, [
    ApolloServerPluginCacheControl({ defaultMaxAge: 60 }),
    herdcachePlugin({ cache: gatewayCache, extensions: true, responseCache: { defaultMaxAge: 60 } }),
  ]); // the subgraphs have no hints: they answer no-store
  try {
    for (let i = 0; i < 2; i++) {
      const answer = (await post(federation.gatewayUrl, QUERY)) as { extensions?: any };
      expect(answer.extensions.cache).toMatchObject({ response: 'miss', notStoredReason: 'stricter_hint' });
    }
    // The advice (add ApolloServerPluginCacheControl({ defaultMaxAge })) is for a server, not a gateway.
    expect(warned.filter((code) => code === 'HERDCACHE_APOLLO_DEFAULT_MAX_AGE')).toEqual([]);
  } finally {
    spy.mockRestore();
    await federation.stop();
    await gatewayCache.close();
  }
});

it('subgraphs answering a shorter max-age than the gateway default: stored for that long, and shared', async () => {
  const clock = manualClock();
  const gatewayCache = createCache({ clock });
  const federation = await startFederation(
    createCache(),
    undefined,
    [
      ApolloServerPluginCacheControl({ defaultMaxAge: 60 }),
      herdcachePlugin({ cache: gatewayCache, extensions: true, responseCache: { defaultMaxAge: 60 } }),
    ],
    10, // the subgraphs' responses say max-age=10: the key is made for 60 s, the result allows 10
  );
  const cacheOf = async () => ((await post(federation.gatewayUrl, QUERY)) as { extensions?: any }).extensions.cache;
  try {
    const first = await cacheOf();
    expect(first.response).toBe('miss');
    expect(first.notStoredReason).toBeUndefined();
    expect((await cacheOf()).response).toBe('hit');
    clock.advance(11_000); // past the 10 s it was stored for
    const burst = await Promise.all(Array.from({ length: 20 }, () => cacheOf()));
    const outcomes = burst.map((c: { response: string }) => c.response).sort();
    // One executed; the others joined it or read what it stored (before: each executed, `not_shared`).
    expect(outcomes.filter((o: string) => o === 'miss')).toHaveLength(1);
    expect(outcomes.filter((o: string) => o === 'coalesced' || o === 'hit')).toHaveLength(19);
  } finally {
    await federation.stop();
    await gatewayCache.close();
  }
});

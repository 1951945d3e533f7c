/**
 * A response whose end-of-fill tag read fails for part of its tags (a Cluster with one slot
 * group's master down: the store rejects with a StorePartialError carrying NaN for that group's
 * tags) is served, not stored, and reported `store_unavailable`: nothing was invalidated. The
 * partial failure is made on a real redisStore as its link assembles it.
 */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { StorePartialError } from '../../src/core/errors';
import { redisStore } from '../../src/redis';
import { responseFixture } from '../graphql/response-fixture';
import { connect, randomPrefix } from './helpers';

it('a partial tag-version failure is reported store_unavailable, not invalidated', async () => {
  const client = await connect();
  const store = redisStore({ client, prefix: randomPrefix('partial') });
  const original = store.tagVersionsSince.bind(store);
  let failOneGroup = true;
  store.tagVersionsSince = async (tags: readonly string[], since: number) => {
    const versions = await original(tags, since);
    if (!failOneGroup || tags.length < 2) return versions;
    const partial = versions.slice();
    partial[partial.length - 1] = NaN; // the failed slot group's tag: unknown
    throw new StorePartialError(new Error('CLUSTERDOWN'), partial, 'redis tagVersions failed for 1 of 2 slot groups');
  };
  const f = responseFixture({ store });
  const apollo = new ApolloServer({
    schema: f.schema,
    plugins: [herdcachePlugin({ cache: f.cache, extensions: true, responseCache: true })],
  });
  await apollo.start();
  try {
    const response = await apollo.executeOperation({ query: '{ products { id name } user(id: "1") { id name } }' });
    if (response.body.kind !== 'single') throw new Error('not single');
    const cache = response.body.singleResult.extensions?.cache as Record<string, unknown>;
    expect(cache).toMatchObject({ response: 'miss', notStoredReason: 'store_unavailable' });
    expect(f.cache.metrics().total.invalidations).toBe(0);
  } finally {
    failOneGroup = false;
    await apollo.stop();
    await f.cache.close();
    client.disconnect();
  }
}, 30_000);

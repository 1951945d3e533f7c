/**
 * The first response lookup after Redis answers again (the breaker half-open: one trial call
 * admitted) is a hit when the response is stored: the read or lock call, not the tag clock sent
 * beside it, takes the trial. Before, the clock took it, the read was refused, and the stored
 * response was answered as a miss, reported `coalesced`. A real redis-server of this file's own,
 * SIGSTOP / SIGCONT; counted: executions and the reported outcome.
 */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { responseFixture } from '../graphql/response-fixture';
import { breakerOpens, eventually, randomPrefix, stallableServer } from './helpers';

const redis = stallableServer();

async function replica(prefix: string, names?: Map<string, string>) {
  const store = await redis.breakerStore(prefix);
  const f = responseFixture({ store, names });
  const apollo = new ApolloServer({
    schema: f.schema,
    plugins: [herdcachePlugin({ cache: f.cache, extensions: true, responseCache: true })],
  });
  await apollo.start();
  const query = async (source: string) => {
    const response = await apollo.executeOperation({ query: source });
    if (response.body.kind !== 'single') throw new Error('not a single result');
    return response.body.singleResult as { data?: unknown; extensions?: { cache?: { response?: string } } };
  };
  return { f, store, apollo, query };
}

it('the first lookup after a stall is a hit, not a refused read reported coalesced', async () => {
  const prefix = randomPrefix('half-open');
  const a = await replica(prefix);
  const b = await replica(prefix, a.f.names);
  try {
    const query = '{ user(id: "1") { id name } }';
    expect((await a.query(query)).extensions?.cache?.response).toBe('miss');
    redis.pause(true);
    try {
      expect(await breakerOpens(b.store)).toBe(true);
    } finally {
      redis.pause(false);
    }
    // The late replies end the cool-down: the next call is the trial.
    expect(await eventually(() => b.store.breakerState === 'half-open', 10_000)).toBe(true);
    const first = await b.query(query);
    expect(first.data).toEqual({ user: { id: '1', name: 'Ada' } });
    expect(first.extensions?.cache?.response).toBe('hit');
    expect(a.f.calls['user:1'] ?? 0).toBe(1);
    expect(b.f.calls['user:1'] ?? 0).toBe(0);
  } finally {
    await Promise.all([a.apollo.stop(), b.apollo.stop()]);
    await Promise.all([a.f.cache.close(), b.f.cache.close()]);
  }
}, 40_000);

/**
 * While Redis is stalled, a response with entity tags is executed and served, not stored: its
 * tags' versions (and the tag clock) cannot be read. That is the store failing, not an
 * invalidation: reported `store_unavailable`, never `invalidated` (nothing was invalidated).
 */
it('a response whose tag versions cannot be read (Redis stalled) is reported store_unavailable, not invalidated', async () => {
  const a = await replica(randomPrefix('tags-down'));
  try {
    const query = '{ user(id: "1") { id name } }';
    redis.pause(true);
    const reasons: unknown[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const result = (await a.query(query)) as { data?: unknown; extensions?: { cache?: Record<string, unknown> } };
        expect(result.data).toEqual({ user: { id: '1', name: 'Ada' } });
        reasons.push(
          `${String(result.extensions?.cache?.response)}/${String(result.extensions?.cache?.notStoredReason)}`,
        );
      }
    } finally {
      redis.pause(false);
    }
    expect(reasons).toEqual(['miss/store_unavailable', 'miss/store_unavailable', 'miss/store_unavailable']);
    expect(a.f.cache.pendingInvalidations).toEqual({ keys: 0, tags: 0, clear: false });
  } finally {
    await a.apollo.stop();
    await a.f.cache.close();
  }
}, 40_000);

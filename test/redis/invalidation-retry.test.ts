/**
 * An invalidation made while Redis is stalled (its breaker open: the call fails at once) is sent
 * again once Redis answers, so the other replicas stop serving the value it made stale instead of
 * serving it for its whole ttl. A real redis-server of this file's own, SIGSTOP / SIGCONT; what is
 * counted is what the other replica reads and fills.
 */
import { createCache } from '../../src/core/cache';
import type { RedisStore } from '../../src/redis/redis-store';
import { breakerOpens, eventually, randomPrefix, stallableServer } from './helpers';

const redis = stallableServer();
const caches: ReturnType<typeof createCache>[] = [];
afterAll(() => Promise.all(caches.map((cache) => cache.close())));

async function replica(prefix: string): Promise<{ store: RedisStore; cache: ReturnType<typeof createCache> }> {
  const store = await redis.breakerStore(prefix);
  const cache = createCache({ store, ttl: 600_000 });
  caches.push(cache);
  return { store, cache };
}

it('invalidate and invalidateTags made while the breaker is open reach Redis once it answers: the other replica misses', async () => {
  const prefix = randomPrefix('inval-retry');
  const writer = await replica(prefix);
  const reader = await replica(prefix);
  let version = 'old';
  const fills = { plain: 0, tagged: 0 };
  const plain = () => reader.cache.getOrCompute('plain', async () => (fills.plain++, version));
  const tagged = () => reader.cache.getOrCompute('tagged', async () => (fills.tagged++, version), { tags: ['User:1'] });
  expect([await plain(), await tagged()]).toEqual(['old', 'old']);

  redis.pause(true);
  try {
    // The writer's calls time out until its breaker opens: its invalidations then fail at once.
    expect(await breakerOpens(writer.store)).toBe(true);
    version = 'new';
    await writer.cache.invalidate('plain');
    await writer.cache.invalidateTags(['User:1']);
    expect(writer.cache.pendingInvalidations).toEqual({ keys: 1, tags: 1, clear: false });
  } finally {
    redis.pause(false);
  }
  // Once Redis answers, the retry (every 250 ms to 5 s) sends them.
  expect(
    await eventually(
      () => writer.cache.pendingInvalidations.keys + writer.cache.pendingInvalidations.tags === 0,
      20_000,
    ),
  ).toBe(true);
  expect([await plain(), await tagged()]).toEqual(['new', 'new']);
  expect(fills).toEqual({ plain: 2, tagged: 2 });
}, 40_000);

/**
 * An invalidation made while Redis is stalled (its breaker open: the call fails at once) is sent
 * again once Redis answers, so the other replicas stop serving the value it made stale instead of
 * serving it for its whole ttl. A real redis-server of this file's own, SIGSTOP / SIGCONT; what is
 * counted is what the other replica reads and fills.
 */
import { createCache } from '../../src/core/cache';
import type { RedisStore } from '../../src/redis/redis-store';
import { breakerOpens, eventually, randomPrefix, stallableServer } from './helpers';
import { delegatingL2 } from './tiered/helpers';
import { deferred } from '../helpers';

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
  // Once Redis answers, the retry (every 250 ms to 1 s, sooner once a call succeeds) sends them.
  expect(
    await eventually(
      () => writer.cache.pendingInvalidations.keys + writer.cache.pendingInvalidations.tags === 0,
      20_000,
    ),
  ).toBe(true);
  expect([await plain(), await tagged()]).toEqual(['new', 'new']);
  expect(fills).toEqual({ plain: 2, tagged: 2 });
}, 40_000);

it('while an invalidation is unsent, the writer reads nothing it covers from Redis (read, lock re-check): its own reads after the write are fresh', async () => {
  const prefix = randomPrefix('inval-unsent');
  const real = await redis.breakerStore(prefix);
  // Redis answers every call but this replica's invalidations (refused, as a timed-out call is).
  const refusing = { on: false };
  const refused = () => Promise.reject(new Error('invalidation refused by the test'));
  const store = delegatingL2(real, {
    delete: (keys, options) => (refusing.on ? refused() : real.delete(keys, options)),
    invalidateTags: (tags) => (refusing.on ? refused() : real.invalidateTags(tags)),
  });
  const writer = createCache({ store, ttl: 600_000 });
  const reader = await replica(prefix);
  caches.push(writer);
  let version = 'old';
  const fills = { plain: 0, tagged: 0, other: 0 };
  const load = (cache: ReturnType<typeof createCache>) => ({
    plain: () => cache.getOrCompute('plain', async () => (fills.plain++, version)),
    tagged: () => cache.getOrCompute('tagged', async () => (fills.tagged++, version), { tags: ['User:1'] }),
    other: () => cache.getOrCompute('other', async () => (fills.other++, version), { tags: ['User:2'] }),
  });
  const [mine, theirs] = [load(writer), load(reader.cache)];
  expect([await mine.plain(), await mine.tagged(), await mine.other()]).toEqual(['old', 'old', 'old']);

  refusing.on = true;
  version = 'new';
  await writer.invalidate('plain');
  await writer.invalidateTags(['User:1']);
  expect(writer.pendingInvalidations).toEqual({ keys: 1, tags: 1, clear: false });
  // Redis still holds the older values (the other replica reads them until the retry lands)…
  expect([await theirs.plain(), await theirs.tagged()]).toEqual(['old', 'old']);
  // …this replica does not: it fills, and reads what it did not invalidate.
  expect([await mine.plain(), await mine.tagged(), await mine.other()]).toEqual(['new', 'new', 'old']);
  expect(fills).toEqual({ plain: 2, tagged: 2, other: 1 });
  refusing.on = false;
  expect(
    await eventually(() => writer.pendingInvalidations.keys + writer.pendingInvalidations.tags === 0, 20_000),
  ).toBe(true);
  expect([await theirs.plain(), await theirs.tagged()]).toEqual(['new', 'new']);
}, 40_000);

it('while an invalidation is unsent, the writer does not take a value another replica announces for a fill that started before it', async () => {
  const prefix = randomPrefix('inval-unsent-announced');
  const real = await redis.breakerStore(prefix);
  const refused = () => Promise.reject(new Error('invalidation refused by the test'));
  const store = delegatingL2(real, { invalidateTags: () => refused() });
  const writer = createCache({ store, ttl: 600_000 });
  const other = await replica(prefix);
  caches.push(writer);
  // The other replica's fill reads the database before the write, and lands after it.
  const gate = deferred<void>();
  let otherFills = 0;
  const otherLoad = other.cache.getOrCompute(
    'k',
    async () => {
      otherFills++;
      await gate.promise;
      return 'old';
    },
    { tags: ['User:1'] },
  );
  expect(await eventually(() => otherFills === 1, 20_000)).toBe(true);
  await writer.invalidateTags(['User:1']); // refused: unsent
  expect(writer.pendingInvalidations.tags).toBe(1);
  let writerFills = 0;
  // The writer finds the other replica's lock and waits for its write (announced to it, value included).
  const mine = writer.getOrCompute('k', async () => (writerFills++, 'new'), { tags: ['User:1'] });
  expect(await eventually(() => writer.metrics().total.lockContended === 1, 20_000)).toBe(true);
  gate.resolve();
  expect(await otherLoad).toBe('old');
  expect(await mine).toBe('new'); // its own fill, not the announced value that predates its write
  expect(writerFills).toBe(1);
}, 40_000);

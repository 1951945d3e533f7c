/**
 * Validity follows the entry: an entry written with tags is a miss once one of them is
 * invalidated, also for a load that does not name the tags (as the memory store already behaves).
 * On Redis and on the tiered store, in one replica and across two.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { redisStore } from '../../src/redis/redis-store';
import { replica as tieredReplica, type Replica } from './tiered/helpers';
import { connect, randomPrefix } from './helpers';

let client: Redis;
const replicas: Replica[] = [];
beforeAll(async () => {
  client = await connect();
});
afterEach(async () => {
  await Promise.all(replicas.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await client.quit();
});

async function scenario(writer: Cache, reader: Cache): Promise<string[]> {
  const ran: string[] = [];
  expect(await writer.getOrCompute('k', () => (ran.push('f'), 'old'), { tags: ['T'] })).toBe('old');
  await writer.invalidateTags(['T']);
  // No tags named here: the entry's own tags decide.
  expect(await reader.getOrCompute('k', () => (ran.push('g'), 'new'))).toBe('new');
  // And the new value (written untagged) is a hit afterwards.
  expect(await reader.getOrCompute('k', () => (ran.push('h'), 'newer'))).toBe('new');
  return ran;
}

it('memory store (the reference behaviour)', async () => {
  const cache = createCache({ ttl: 60_000, store: memoryStore() });
  expect(await scenario(cache, cache)).toEqual(['f', 'g']);
});

it('Redis store, one replica', async () => {
  const cache = createCache({ ttl: 60_000, store: redisStore({ client, prefix: randomPrefix('etags1') }) });
  expect(await scenario(cache, cache)).toEqual(['f', 'g']);
});

it('Redis store, invalidated on one replica, read untagged on another', async () => {
  const prefix = randomPrefix('etags2');
  const other = await connect();
  try {
    const a = createCache({ ttl: 60_000, store: redisStore({ client, prefix }) });
    const b = createCache({ ttl: 60_000, store: redisStore({ client: other, prefix }) });
    expect(await scenario(a, b)).toEqual(['f', 'g']);
  } finally {
    other.disconnect();
  }
});

it('Redis store: an entry whose tags are still current is a hit for an untagged load (one extra version read)', async () => {
  const cache = createCache({ ttl: 60_000, store: redisStore({ client, prefix: randomPrefix('etags3') }) });
  await cache.getOrCompute('k', () => 'v', { tags: ['T', 'U'] });
  await cache.invalidateTags(['other']);
  let fills = 0;
  expect(await cache.getOrCompute('k', () => ++fills)).toBe('v');
  expect(fills).toBe(0);
});

it('tiered store, one replica and across two', async () => {
  const prefix = randomPrefix('etags4');
  const a = await tieredReplica({ prefix });
  const b = await tieredReplica({ prefix });
  replicas.push(a, b);
  expect(await scenario(a.cache, a.cache)).toEqual(['f', 'g']);
  const prefix2 = randomPrefix('etags5');
  const c = await tieredReplica({ prefix: prefix2 });
  const d = await tieredReplica({ prefix: prefix2 });
  replicas.push(c, d);
  expect(await scenario(c.cache, d.cache)).toEqual(['f', 'g']);
});

/**
 * Long keys on Redis: the registry hands the store the digest (src/core/long-keys.ts), so a key of
 * 100 Ki characters is one short Redis key, shared by every replica, invalidated by the key as the
 * app wrote it; a long tag's version key stays short too. Against the real redis-server.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { boundedKey } from '../../src/core/long-keys';
import { redisStore } from '../../src/redis/redis-store';
import { connect, randomPrefix } from '../redis/helpers';

describe('long keys on Redis', () => {
  let clientA: Redis;
  let clientB: Redis;
  beforeAll(async () => {
    clientA = await connect();
    clientB = await connect();
  });
  afterAll(async () => {
    await clientA.quit();
    await clientB.quit();
  });

  it('two replicas, a 100 Ki-character key: one fill, one short Redis key, invalidated by the key as written', async () => {
    const prefix = randomPrefix('longkeys');
    const replicaA = createCache({ store: redisStore({ client: clientA, prefix }), ttl: 60_000 });
    const replicaB = createCache({ store: redisStore({ client: clientB, prefix }), ttl: 60_000 });
    const key = `report:${'r'.repeat(100_000)}`;
    const tag = `tag:${'t'.repeat(50_000)}`;
    let fills = 0;
    const fill = async () => ++fills;
    try {
      expect(await replicaA.getOrCompute(key, fill, { tags: [tag] })).toBe(1);
      expect(await replicaB.getOrCompute(`report:${'r'.repeat(100_000)}`, fill, { tags: [tag] })).toBe(1);
      expect(fills).toBe(1);
      const stored = await clientA.keys(`${prefix}*`);
      expect(stored).toContain(`${prefix}{${boundedKey(key)}}`);
      for (const name of stored) expect(name.length).toBeLessThanOrEqual(prefix.length + 300); // a long tag: Redis hashes its version key to maxKeyLength (256)

      await replicaB.invalidate(key);
      expect(await replicaA.getOrCompute(key, fill, { tags: [tag] })).toBe(2);
      await replicaA.invalidateTags([tag]);
      expect(await replicaB.getOrCompute(key, fill, { tags: [tag] })).toBe(3);
      for (const name of await clientA.keys(`${prefix}*`)) expect(name.length).toBeLessThanOrEqual(prefix.length + 300); // a long tag: Redis hashes its version key to maxKeyLength (256)
    } finally {
      await replicaA.close();
      await replicaB.close();
      const left = await clientA.keys(`${prefix}*`);
      if (left.length > 0) await clientA.del(...left);
    }
  });
});

/**
 * A getOrCompute caller that joins another caller's fill with tags of its own: its tags join the
 * value's, so invalidateTags of one of them reaches the fill in flight and the value written
 * (memory), or the value is served and not written (a tag-versioned store: the joiner's tags'
 * versions were not read before the fill). Before, the joiner's tags were dropped: a caller naming
 * `User:1` got, and kept until the ttl ended, a value `invalidateTags(['User:1'])` did not reach.
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core';
import { redisStore } from '../../src/redis';
import { deferred, flush } from '../helpers';
import { connect, randomPrefix } from '../redis/helpers';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

describe.each([
  ['memory', () => undefined],
  ['redis', () => redisStore({ client, prefix: randomPrefix('joiner-tags') })],
])('%s store', (name, store) => {
  it("an invalidation of a joiner's tag during the fill: later callers get the new value", async () => {
    const cache = createCache({ ttl: 60_000, store: store() });
    let db = 1;
    let fills = 0;
    const gate = deferred<void>();
    const fill = async () => {
      fills++;
      const read = db;
      await gate.promise;
      return `v${read}`;
    };
    const starter = cache.getOrCompute('profile:1', fill, { tags: ['Account:1'] });
    const joiner = cache.getOrCompute('profile:1', fill, { tags: ['User:1'] });
    for (let i = 0; i < 200 && fills === 0; i++) await flush(2);
    expect(fills).toBe(1);
    db = 2;
    await cache.invalidateTags(['User:1']);
    const after = cache.getOrCompute('profile:1', fill, { tags: ['User:1'] });
    gate.resolve();
    // The fill is abandoned by the joiner's tag: everyone waiting starts over, on the new value.
    expect(await starter).toBe('v2');
    expect(await joiner).toBe('v2');
    expect(await after).toBe('v2');
    expect(fills).toBe(2);
    expect(await cache.getOrCompute('profile:1', fill, { tags: ['User:1'] })).toBe('v2');
    await cache.close();
  });

  it("without an invalidation: the value is written with the joiner's tags too (memory), or served only (Redis)", async () => {
    const cache = createCache({ ttl: 60_000, store: store() });
    let fills = 0;
    const gate = deferred<void>();
    const fill = async () => {
      fills++;
      await gate.promise;
      return `v${fills}`;
    };
    const both = Promise.all([
      cache.getOrCompute('profile:2', fill, { tags: ['Account:2'] }),
      cache.getOrCompute('profile:2', fill, { tags: ['User:2'] }),
    ]);
    for (let i = 0; i < 200 && fills === 0; i++) await flush(2);
    gate.resolve();
    expect(await both).toEqual(['v1', 'v1']);
    const next = await cache.getOrCompute('profile:2', fill, { tags: ['User:2'] });
    expect(next).toBe(name === 'memory' ? 'v1' : 'v2');
    await cache.invalidateTags(['User:2']);
    expect(await cache.getOrCompute('profile:2', fill, { tags: ['User:2'] })).toBe(name === 'memory' ? 'v2' : 'v3');
    await cache.close();
  });
});

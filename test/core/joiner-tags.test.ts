/**
 * A getOrCompute caller that joins another caller's fill with tags of its own: its tags join the
 * value's, so invalidateTags of one of them reaches the fill in flight, and the value is served,
 * not written (one of them may have been invalidated after the fill started, before the joiner
 * came); the next caller fills with its own tags. Before, the joiner's tags were dropped: a caller naming
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
])('%s store', (_name, store) => {
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

  it("a joiner's tag invalidated after the fill started, before it joined: the value is not written", async () => {
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
    const starter = cache.getOrCompute('profile:3', fill, { tags: ['Account:3'] });
    for (let i = 0; i < 200 && fills === 0; i++) await flush(2);
    db = 2;
    await cache.invalidateTags(['User:3']); // before the joiner comes: the fill carries no User:3
    const joiner = cache.getOrCompute('profile:3', fill, { tags: ['User:3'] });
    gate.resolve();
    expect(await starter).toBe('v1');
    expect(await joiner).toBe('v1'); // as a hit on a value without User:3 would be
    // Not written under tags one of which it may predate: the next caller fills.
    expect(await cache.getOrCompute('profile:3', fill, { tags: ['User:3'] })).toBe('v2');
    expect(fills).toBe(2);
    await cache.close();
  });

  it('without an invalidation: the value is served to the joiner, not written; the next caller fills with its own tags', async () => {
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
    expect(await cache.getOrCompute('profile:2', fill, { tags: ['User:2'] })).toBe('v2');
    expect(await cache.getOrCompute('profile:2', fill, { tags: ['User:2'] })).toBe('v2'); // written now
    await cache.invalidateTags(['User:2']);
    expect(await cache.getOrCompute('profile:2', fill, { tags: ['User:2'] })).toBe('v3');
    await cache.close();
  });
});

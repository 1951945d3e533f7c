/** LateTagged fills (the response layer's): tags known when the value is, and the race they must not lose. */
import { createCache } from '../../src/core/cache';
import { LateTagged } from '../../src/core/late-tags';
import { redisStore } from '../../src/redis';
import { deferred, flush } from '../helpers';
import { connect, randomPrefix } from '../redis/helpers';
import type Redis from 'ioredis';

let client: Redis;
beforeAll(async () => {
  client = await connect();
});
afterAll(async () => {
  await client.quit();
});

const lateLoad = (cache: ReturnType<typeof createCache>, key: string, fill: () => unknown) => {
  const c = cache._computation({ ttl: 60_000, label: 'response' });
  return cache._load<unknown>(c.source, key, fill, { ...c.policy, lateTags: true }, undefined, undefined);
};

describe.each([
  ['memory', () => undefined],
  ['redis', () => redisStore({ client, prefix: randomPrefix('late') })],
])('late tags (%s)', (_name, store) => {
  it('the value is stored with its late tags: invalidating one of them makes it a miss', async () => {
    const cache = createCache({ store: store() });
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    await cache.invalidateTags(['User:2']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    await cache.invalidateTags(['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
  });

  it('tags a fill vouches distinct are stored as given: invalidating any one of them makes it a miss', async () => {
    const cache = createCache({ store: store() });
    let fills = 0;
    const fill = () => new LateTagged({ n: ++fills }, ['User:1', 'Post:2'], true);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 1 });
    await cache.invalidateTags(['Post:2']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    await cache.invalidateTags(['User:1']);
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 3 });
  });

  it('any tag invalidated while a late-tagged fill runs abandons it: its result is not written, its waiters start over', async () => {
    const cache = createCache({ store: store() });
    const gate = deferred<void>();
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      if (n === 1) await gate.promise;
      return new LateTagged({ n }, ['User:1']);
    };
    const first = lateLoad(cache, 'k', fill);
    // The fill starts after the store's read (a Redis round trip: more than a few ticks on a loaded machine).
    for (let i = 0; i < 500 && fills === 0; i++) await flush(2);
    expect(fills).toBe(1);
    await cache.invalidateTags(['Unrelated:9']); // the fill's tags are not known yet: any tag counts
    gate.resolve();
    expect(await first).toEqual({ n: 2 });
    expect(await lateLoad(cache, 'k', fill)).toEqual({ n: 2 });
    expect(fills).toBe(2);
  });
});

/**
 * A loader's synchronous callbacks given as async functions that reject (`key`, `tags`,
 * `batchScheduleFn`): the load fails (or, for the scheduler, is dispatched at the default moment)
 * with a clear error, and the rejection is observed, never left unhandled: under Node's default an
 * unhandled rejection ends the process, so one bad call would end the server.
 */
import { createCache } from '../../src/core/cache';
import { rejecting, watchUnhandledRejections } from '../helpers';

const { unhandled, settled: settle } = watchUnhandledRejections();

it('an async key function that rejects: the load fails naming the key, the rejection is observed', async () => {
  const cache = createCache();
  const users = cache.loader<number, string>({
    name: 'user',
    ttl: 60_000,
    key: rejecting('key') as never,
    batch: async (ids) => ids.map((id) => `user ${id}`),
  });
  expect(() => users.load(1)).toThrow(/loader "user" got key 1, which maps to object \[object Promise\]/);
  await settle();
  expect(unhandled()).toEqual([]);
  await cache.close();
});

it('an async tags function that rejects: the load fails naming the option, the rejection is observed', async () => {
  const cache = createCache();
  const users = cache.loader<string, string>({
    name: 'user',
    ttl: 60_000,
    tags: rejecting('tags') as never,
    batch: async (ids) => ids.map((id) => `user ${id}`),
  });
  await expect(users.load('1')).rejects.toThrow(/option "tags" must be an array of non-empty strings/);
  await settle();
  expect(unhandled()).toEqual([]);
  await cache.close();
});

it('an async batchScheduleFn that rejects before dispatching: the batch leaves at the default moment', async () => {
  const cache = createCache();
  const batches: string[][] = [];
  const users = cache.loader<string, string>({
    name: 'user',
    ttl: 60_000,
    batchScheduleFn: rejecting('batchScheduleFn') as never,
    batch: async (ids) => {
      batches.push([...ids]);
      return ids.map((id) => `user ${id}`);
    },
  });
  expect(await Promise.all([users.load('1'), users.load('2')])).toEqual(['user 1', 'user 2']);
  expect(batches).toEqual([['1', '2']]);
  await settle();
  expect(unhandled()).toEqual([]);
  await cache.close();
});

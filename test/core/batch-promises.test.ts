/**
 * A batch function that returns a promise per key (`ids.map(async (id) => …)`), as DataLoader
 * takes it: each key's outcome is its promise's. A rejected one fails that key only and is not
 * cached (the next load calls the batch again); a fulfilled one stores its value, not the promise.
 * `loader.prime(key, promise)` primes what the promise resolves to, nothing when it rejects.
 * Before, the promises themselves were stored: a transient failure was served for the whole ttl.
 */
import { createCache } from '../../src/core/cache';
import { watchUnhandledRejections } from '../helpers';

const rejections = watchUnhandledRejections();

it('a rejected promise per key fails that key once; the next load fills it again', async () => {
  const cache = createCache({ ttl: 60_000 });
  let batches = 0;
  let failOnce = true;
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => {
      batches++;
      return ids.map(async (id) => {
        if (id === 1 && failOnce) {
          failOnce = false;
          throw new Error('transient');
        }
        return `user-${id}`;
      });
    },
  });
  const first = await Promise.allSettled([users.load(1), users.load(2)]);
  expect(first.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
    'transient',
    'user-2',
  ]);
  expect(await users.load(1)).toBe('user-1');
  expect(await users.load(1)).toBe('user-1');
  expect(batches).toBe(2);
  expect(users.read(2)).toBe('user-2'); // the value itself, not a promise
  expect(users.read(1)).toBe('user-1');
  const counts = cache.metrics().sources.user!;
  expect(counts.fillFailures).toBe(1);
  expect(counts.fills).toBe(2);
  await cache.close();
});

it('a promise that resolves to an Error fails its key, not cached', async () => {
  const cache = createCache({ ttl: 60_000 });
  let batches = 0;
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => {
      batches++;
      return ids.map((id) => Promise.resolve(batches === 1 ? new Error(`no ${id}`) : `user-${id}`));
    },
  });
  await expect(users.load(1)).rejects.toThrow('no 1');
  expect(await users.load(1)).toBe('user-1');
  await cache.close();
});

it('prime(key, promise): what it resolves to; a rejected one primes nothing', async () => {
  const cache = createCache({ ttl: 60_000 });
  let batches = 0;
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => {
      batches++;
      return ids.map((id) => `loaded-${id}`);
    },
  });
  await users.prime(1, Promise.resolve('primed-1') as unknown as string);
  expect(users.read(1)).toBe('primed-1');
  await users.prime(2, Promise.reject(new Error('down')) as unknown as string);
  expect(await users.load(2)).toBe('loaded-2');
  expect(batches).toBe(1);
  await cache.close();
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('prime(key, promise) then clear(key): the clear, issued last, wins', async () => {
  const cache = createCache({ ttl: 60_000 });
  const users = cache.loader<number, string>({ name: 'user', batch: async (ids) => ids.map((id) => `loaded-${id}`) });
  const primed = users.prime(1, delay(50).then(() => 'stale-primed') as unknown as string);
  await users.clear(1);
  await primed;
  expect(await users.load(1)).toBe('loaded-1');
  await cache.close();
});

it('prime(key, slow promise) then prime(key, value): the later prime wins', async () => {
  const cache = createCache({ ttl: 60_000 });
  const users = cache.loader<number, string>({ name: 'user', batch: async (ids) => ids.map((id) => `loaded-${id}`) });
  const first = users.prime(1, delay(50).then(() => 'older') as unknown as string);
  await users.prime(1, 'newer');
  await first;
  expect(await users.load(1)).toBe('newer');
  await cache.close();
});

it('per-key promises are settled together, as Promise.all in a batch function: a slow one holds its batch', async () => {
  const cache = createCache({ ttl: 60_000 });
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => ids.map((id) => (id === 2 ? delay(30).then(() => `user-${id}`) : `user-${id}`)),
  });
  let firstSettled = false;
  const one = users.load(1).then((value) => ((firstSettled = true), value));
  const two = users.load(2);
  await delay(5);
  expect(firstSettled).toBe(false); // documented: the batch settles once its keys' promises have
  expect(await Promise.all([one, two])).toEqual(['user-1', 'user-2']);
  await cache.close();
});

it('a load filled while prime(key, promise) is pending: the prime, written last, is what stays', async () => {
  const cache = createCache({ ttl: 60_000 });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => {
      await gate;
      return ids.map((id) => `loaded-${id}`);
    },
  });
  const primed = users.prime(1, delay(20).then(() => 'primed') as unknown as string);
  const loading = users.load(1); // it read the source before the prime's value was known
  await primed;
  open();
  await loading;
  expect(await users.load(1)).toBe('primed');
  await cache.close();
});

it('prime(key, promise) superseded while pending by a prime whose promise rejects: the older value still goes', async () => {
  const cache = createCache({ ttl: 60_000 });
  let version = 'old';
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => ids.map((id) => `${version}-${id}`),
  });
  expect(await users.load(1)).toBe('old-1');
  version = 'new';
  const first = users.prime(1, delay(20).then(() => 'new-1') as unknown as string);
  await users.prime(1, Promise.reject(new Error('source down')) as unknown as string);
  await first;
  expect(await users.load(1)).toBe('new-1'); // not 'old-1': filled again from the changed source
  await cache.close();
});

it('prime(key, rejecting promise) where nothing is stored (coalesce-only): its rejection is observed, not unhandled', async () => {
  const cache = createCache(); // no ttl: coalesce-only
  const users = cache.loader<number, string>({ name: 'user', batch: async (ids) => ids.map((id) => `loaded-${id}`) });
  await users.prime(1, Promise.reject(new Error('source down')) as unknown as string);
  await rejections.settled();
  expect(rejections.unhandled()).toEqual([]);
  await cache.close();
});

/**
 * Errors made in another realm (a `vm` context, a test runner's sandbox) are Errors all the same:
 * thrown, they reach the callers as the same object; returned, they are a failed fill, never a
 * cached value. And a batch result of the wrong shape is a TypeError, as DataLoader's is.
 */
import { runInNewContext } from 'node:vm';
import DataLoader from 'dataloader';
import { createCache } from '../../src/core/cache';
import { HerdcacheBatchError, HerdcacheError } from '../../src/core/errors';

const foreignError = (message: string): Error => runInNewContext(`new Error(${JSON.stringify(message)})`) as Error;

it('an Error of another realm is not `instanceof Error` here (what this file is about)', () => {
  expect(foreignError('x') instanceof Error).toBe(false);
});

it('getOrCompute: a thrown foreign Error reaches the caller as the same object, and is not cached', async () => {
  const cache = createCache({ ttl: 60_000 });
  const error = foreignError('db down');
  let calls = 0;
  const fill = async () => {
    calls++;
    if (calls === 1) throw error;
    return 'value';
  };
  await expect(cache.getOrCompute('k', fill)).rejects.toBe(error);
  expect(await cache.getOrCompute('k', fill)).toBe('value');
  expect(calls).toBe(2);
});

it('getOrCompute and loader: a returned foreign Error is a failed fill, never a cached value', async () => {
  const cache = createCache({ ttl: 60_000 });
  const error = foreignError('returned');
  let calls = 0;
  const fill = async () => (++calls === 1 ? error : 'value');
  await expect(cache.getOrCompute('k', fill)).rejects.toBe(error);
  expect(await cache.getOrCompute('k', fill)).toBe('value');

  let batches = 0;
  const users = cache.loader<string, string>({
    name: 'users',
    batch: async (keys) =>
      ++batches === 1 ? keys.map((key) => (key === 'b' ? foreignError(`no ${key}`) : key)) : keys,
  });
  const [a, b] = await Promise.allSettled([users.load('a'), users.load('b')]);
  expect(a).toEqual({ status: 'fulfilled', value: 'a' });
  expect(b.status).toBe('rejected');
  expect((b as PromiseRejectedResult).reason.message).toBe('no b');
  expect(await users.load('b')).toBe('b'); // not cached: filled again
  expect(batches).toBe(2);
});

it.each([
  ['not an array', async () => 'nope' as unknown as string[], 'E_BATCH_NOT_ARRAY'],
  ['the wrong length', async (keys: readonly string[]) => keys.slice(1), 'E_BATCH_LENGTH'],
])(
  'a batch returning %s: each key rejects with a TypeError, as with DataLoader, and a HerdcacheError',
  async (_, batch, code) => {
    const cache = createCache({ ttl: 60_000 });
    const users = cache.loader<string, string>({ name: 'users', batch });
    const dataloader = new DataLoader<string, string>(batch as never);
    const [ours, theirs] = await Promise.all([
      Promise.allSettled([users.load('a'), users.load('b')]),
      Promise.allSettled([dataloader.load('a'), dataloader.load('b')]),
    ]);
    for (const settled of [...ours, ...theirs]) {
      expect(settled.status).toBe('rejected');
      expect((settled as PromiseRejectedResult).reason).toBeInstanceOf(TypeError);
    }
    for (const settled of ours) {
      const reason = (settled as PromiseRejectedResult).reason;
      expect(reason).toBeInstanceOf(HerdcacheError);
      expect(reason).toBeInstanceOf(HerdcacheBatchError);
      expect(reason.code).toBe(code);
    }
  },
);

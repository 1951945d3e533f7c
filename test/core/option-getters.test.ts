/**
 * Bad input that used to escape the E_INVALID_OPTION rule (the raw error, no option named): an
 * options getter that throws, a hooks getter that throws, a clock whose now() throws, a Symbol as
 * memoryStore's `max`. Each is refused naming the option, and nothing else is affected.
 */
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';

const thrower = (message: string) => () => {
  throw new Error(message);
};

it.each([
  [
    'a throwing ttl getter',
    () => createCache(Object.defineProperty({}, 'ttl', { get: thrower('getter!'), enumerable: true })),
    '"ttl"',
  ],
  [
    'a throwing hooks getter',
    () =>
      createCache({ hooks: Object.defineProperty({}, 'onHit', { get: thrower('hook getter!'), enumerable: true }) }),
    '"hooks.onHit"',
  ],
  ['a clock whose now() throws', () => createCache({ clock: { now: thrower('clock!') } }), '"clock"'],
  ['a Symbol as max', () => memoryStore({ max: Symbol('x') as unknown as number }), '"max"'],
])('%s: E_INVALID_OPTION naming the option', (_label, make, named) => {
  let caught: unknown;
  try {
    make();
  } catch (error) {
    caught = error;
  }
  expect(caught).toMatchObject({ code: 'E_INVALID_OPTION' });
  expect((caught as Error).message).toContain(named);
});

it('the cache made next is unaffected', async () => {
  const cache = createCache({ ttl: 1000 });
  expect(await cache.getOrCompute('k', async () => 'v')).toBe('v');
  await cache.close();
});

it('getOrCompute options whose getter throws: a rejection naming the option, on a fresh cache and after a reused resolution', async () => {
  const cache = createCache({ ttl: 1_000 });
  const throwing = () => ({
    get ttl(): number {
      throw new Error('boom');
    },
  });
  const named = expect.objectContaining({
    code: 'E_INVALID_OPTION',
    message: expect.stringMatching(/option "ttl" could not be read: its getter threw boom/),
  });
  await expect(cache.getOrCompute('k', () => 1, throwing())).rejects.toEqual(named);
  expect(await cache.getOrCompute('warm', () => 1, { ttl: 500 })).toBe(1); // a resolution to reuse
  let result: Promise<number> | undefined;
  expect(() => (result = cache.getOrCompute('k', () => 1, throwing()))).not.toThrow();
  await expect(result).rejects.toEqual(named);
  expect(await cache.getOrCompute('k', () => 2, { ttl: 500 })).toBe(2); // nothing corrupted
  await cache.close();
});

it('a signal getter that throws: a rejection naming the option (getOrCompute, scope.getOrCompute, loader.load)', async () => {
  const cache = createCache({ ttl: 1_000 });
  const throwing = () => ({
    get signal(): AbortSignal {
      throw new Error('boom');
    },
  });
  const named = expect.objectContaining({
    code: 'E_INVALID_OPTION',
    message: expect.stringMatching(/option "signal" could not be read: its getter threw boom/),
  });
  await expect(cache.getOrCompute('k', () => 1, throwing())).rejects.toEqual(named);
  await expect(cache.request().getOrCompute('k', () => 1, throwing())).rejects.toEqual(named);
  const users = cache.loader<string, string>({ name: 'user', batch: async (ids) => ids });
  await expect(users.load('1', throwing())).rejects.toEqual(named);
  await cache.close();
});

/**
 * An invalidation frees the callers of a stuck fill (docs/core.md): they re-contend. They do so
 * with the latest joiner's fill, not the starter's: the starter's may be what is stuck (its
 * request's hung connection), and started again it would hold them all again, for good.
 * Counted: which fills ran, and every caller answered.
 */
import { createCache } from '../../src/core/cache';

const never = new Promise<string>(() => {});

it('after invalidate, the waiters of a stuck fill re-contend with the latest joiner fill, and all answer', async () => {
  const cache = createCache({ ttl: 60_000 });
  const calls: string[] = [];
  const first = cache.getOrCompute('report', () => {
    calls.push('first');
    return never; // its connection hangs, every time
  });
  await new Promise((resolve) => setImmediate(resolve));
  const second = cache.getOrCompute('report', async () => {
    calls.push('second');
    return 'fresh';
  });
  await new Promise((resolve) => setImmediate(resolve));
  expect(calls).toEqual(['first']);
  await cache.invalidate('report');
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('pending'), 2000);
  });
  try {
    expect(await Promise.race([Promise.all([first, second]), bound])).toEqual(['fresh', 'fresh']);
  } finally {
    clearTimeout(timer);
  }
  expect(calls).toEqual(['first', 'second']);
  expect(cache.inFlight).toBe(0);
  await cache.close();
});

it('a loader: the waiters re-contend through its batch, once', async () => {
  const cache = createCache({ ttl: 60_000 });
  let batches = 0;
  let stuck = true;
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => {
      batches++;
      if (stuck) {
        stuck = false;
        return never as unknown as string[];
      }
      return ids.map((id) => `u${id}`);
    },
  });
  const first = users.load(1);
  await new Promise((resolve) => setImmediate(resolve));
  const second = users.load(1);
  await cache.invalidate('user:1');
  expect(await Promise.all([first, second])).toEqual(['u1', 'u1']);
  expect(batches).toBe(2);
  await cache.close();
});

const tick = () => new Promise((resolve) => setImmediate(resolve));

async function bounded<T>(work: Promise<T>): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), 2000)));
  try {
    return await Promise.race([work, bound]);
  } finally {
    clearTimeout(timer);
  }
}

it('callers with a signal (request scopes made with one): the stuck starter starts over after the others', async () => {
  const cache = createCache({ ttl: 60_000 });
  const calls: string[] = [];
  const first = cache.request({ signal: new AbortController().signal }).getOrCompute('report', () => {
    calls.push('first');
    return never;
  });
  await tick();
  const second = cache.request({ signal: new AbortController().signal }).getOrCompute('report', async () => {
    calls.push('second');
    return 'fresh';
  });
  await tick();
  await cache.invalidate('report');
  expect(await bounded(Promise.all([first, second]))).toEqual(['fresh', 'fresh']);
  expect(calls).toEqual(['first', 'second']);
  expect(cache.inFlight).toBe(0);
  await cache.close();
});

it('a starter with a signal, a joiner without: both answer with the joiner fill', async () => {
  const cache = createCache({ ttl: 60_000 });
  const first = cache.getOrCompute('report', () => never, { signal: new AbortController().signal });
  await tick();
  const second = cache.getOrCompute('report', async () => 'fresh');
  await tick();
  await cache.invalidate('report');
  expect(await bounded(Promise.all([first, second]))).toEqual(['fresh', 'fresh']);
  await cache.close();
});

it("a joiner under another policy (no tags) is not taken: the retried entry keeps the starter's tags", async () => {
  const cache = createCache({ ttl: 60_000 });
  let db = 'v1';
  let stuck = true;
  const first = cache.getOrCompute('user:1:card', () => (stuck ? never : Promise.resolve(`card ${db}`)), {
    tags: ['user:1'],
  });
  await tick();
  const second = cache.getOrCompute('user:1:card', async () => `card ${db}`); // same key, no tags
  await tick();
  stuck = false;
  await cache.invalidateTags(['user:1']);
  expect(await Promise.all([first, second])).toEqual(['card v1', 'card v1']);
  db = 'v2';
  await cache.invalidateTags(['user:1']); // the write's invalidation reaches the entry
  expect(await cache.getOrCompute('user:1:card', async () => `card ${db}`, { tags: ['user:1'] })).toBe('card v2');
  await cache.close();
});

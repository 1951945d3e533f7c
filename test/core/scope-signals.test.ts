/**
 * Signals inside a request scope:
 * - a memo hit is handed over with the tick's pending batch (DataLoader's order), but a caller
 *   with a signal that fires meanwhile leaves at once, with its reason: beside a batch that never
 *   settles it no longer waits for good, beside a slow one it no longer gets the value after leaving;
 * - a caller without a signal that asks for a key whose only waiter just left (its shared load
 *   told to stop) loads it anew: it no longer gets the other caller's abort reason.
 * Counted: outcomes and batch calls.
 */
import { getEventListeners } from 'node:events';
import { createCache } from '../../src/core/cache';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function watch<T>(promise: Promise<T>): { state: string } {
  const seen = { state: 'pending' };
  promise.then(
    (value) => (seen.state = `fulfilled:${String(value)}`),
    (error: unknown) => (seen.state = `rejected:${(error as Error).message}`),
  );
  return seen;
}

it('a memo hit whose caller leaves rejects at once, beside a batch that never settles', async () => {
  const cache = createCache({ ttl: 60_000 });
  const users = cache.loader<string, string>({
    name: 'user',
    batch: (ids) => (ids.includes('stuck') ? new Promise<string[]>(() => {}) : ids.map((id) => `user-${id}`)),
  });
  const loader = cache.request().loader(users);
  await loader.load('1');
  loader.load('stuck').catch(() => {});
  const leaving = new AbortController();
  const hit = watch(loader.load('1', { signal: leaving.signal }));
  await sleep(5);
  leaving.abort(new Error('caller left'));
  await sleep(20);
  expect(hit.state).toBe('rejected:caller left');
  await cache.close();
});

it('beside a slow batch: the caller that left gets its reason, not the value once the batch ends', async () => {
  const cache = createCache({ ttl: 60_000 });
  let release!: () => void;
  const users = cache.loader<string, string>({
    name: 'user',
    batch: (ids) =>
      ids.some((id) => id.startsWith('slow'))
        ? new Promise<string[]>((resolve) => (release = () => resolve(ids.map((id) => `u-${id}`))))
        : ids.map((id) => `u-${id}`),
  });
  const loader = cache.request().loader(users);
  await loader.load('1');
  const other = watch(loader.load('slow'));
  const leaving = new AbortController();
  const hit = watch(loader.load('1', { signal: leaving.signal }));
  const staying = watch(loader.load('1'));
  await sleep(5);
  leaving.abort(new Error('caller left'));
  await sleep(10);
  expect(hit.state).toBe('rejected:caller left');
  expect(staying.state).toBe('pending'); // handed over with the batch, as DataLoader's
  release();
  await sleep(10);
  expect([hit.state, staying.state, other.state]).toEqual([
    'rejected:caller left',
    'fulfilled:u-1',
    'fulfilled:u-slow',
  ]);
  await cache.close();
});

it("a caller without a signal, right after the only waiter left, loads anew instead of getting that waiter's reason", async () => {
  const cache = createCache({ ttl: 60_000 });
  let batches = 0;
  const users = cache.loader<string, string>({
    name: 'user',
    batch: async (ids) => {
      batches++;
      await sleep(5);
      return ids.map((id) => `user-${id}`);
    },
  });
  const loader = cache.request().loader(users);
  const leaving = new AbortController();
  const a = loader.load('1', { signal: leaving.signal }).catch((error: Error) => `rejected:${error.message}`);
  await sleep(1);
  leaving.abort(new Error('A left'));
  const b = loader.load('1'); // in the same synchronous stretch
  expect(await a).toBe('rejected:A left');
  expect(await b).toBe('user-1');

  const scope = cache.request();
  let fills = 0;
  const fill = async () => {
    fills++;
    await sleep(5);
    return 'G';
  };
  const leavingToo = new AbortController();
  const c = scope.getOrCompute('report:1', fill, { signal: leavingToo.signal }).catch(() => 'left');
  await sleep(1);
  leavingToo.abort(new Error('C left'));
  const d = scope.getOrCompute('report:1', fill);
  expect(await c).toBe('left');
  expect(await d).toBe('G');
  expect(fills).toBe(2);
  expect(batches).toBe(2);
  await cache.close();
});

it('20 memo hits waiting beside a pending load, under the request signal: one abort listener, not one each', async () => {
  const cache = createCache({ ttl: 60_000 });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const users = cache.loader<string, string>({
    name: 'user',
    batch: async (ids) => {
      if (ids.includes('miss')) await gate;
      return ids.map((id) => `u-${id}`);
    },
  });
  const controller = new AbortController();
  const loader = cache.request({ signal: controller.signal }).loader(users);
  const keys = Array.from({ length: 20 }, (_, i) => `k${i}`);
  await loader.loadMany(keys);
  const all = [loader.load('miss'), ...keys.map((key) => loader.load(key))];
  await sleep(20);
  expect(getEventListeners(controller.signal, 'abort').length).toBeLessThanOrEqual(2);
  release();
  expect(await Promise.all(all)).toEqual(['u-miss', ...keys.map((key) => `u-${key}`)]);
  await cache.close();
});

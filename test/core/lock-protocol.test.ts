/**
 * The registry's side of the distributed fill lock (seed 000), driven through an in-process
 * lock store and a manual clock: two caches on one LockingStore act as two replicas.
 */
import { createCache, manualClock } from '../../src/core';
import { deferred, flush } from '../helpers';
import { LockingStore } from '../helpers/lock-store';

function replicas(options: Parameters<typeof createCache>[0] = {}) {
  const clock = manualClock();
  const store = new LockingStore(clock);
  const make = () => createCache({ ttl: Infinity, store, clock, ...options });
  return { clock, store, a: make(), b: make() };
}

describe('fill lock protocol', () => {
  it('across two replicas one fills; the other polls and gets the value', async () => {
    const { store, a, b, clock } = replicas({ lockPollInterval: 50 });
    const gate = deferred<string>();
    let fills = 0;
    const fill = () => {
      fills++;
      return gate.promise;
    };
    const fromA = Array.from({ length: 20 }, () => a.getOrCompute('k', fill));
    await flush();
    const fromB = Array.from({ length: 20 }, () => b.getOrCompute('k', fill));
    await flush();
    expect(fills).toBe(1);
    expect(b.metrics().total.lockContended).toBe(1);
    gate.resolve('v');
    expect(new Set(await Promise.all([...fromA, ...fromB]))).toEqual(new Set(['v']));
    expect(fills).toBe(1);
    expect(a.metrics().total.lockAcquired).toBe(1);
    // b's poll took the free lock only to find a's value (released at once): no fill, not counted.
    expect(b.metrics().total).toMatchObject({ lockAcquired: 0, fills: 0 });
    expect(store.locks.size).toBe(0); // released by the fenced write
    expect(clock.sleeps.length).toBeGreaterThan(0); // b really polled
  });

  it('polls with exponential backoff capped at 1 s and never sleeps past the deadline', async () => {
    const { store, a, clock } = replicas({ lockPollInterval: 50, lockWaitTimeout: 5000 });
    store.holdLock('k', 60_000); // a holder that never writes
    const fill = jest.fn(async () => 'local');
    expect(await a.getOrCompute('k', fill)).toBe('local');
    expect(clock.sleeps).toEqual([50, 100, 200, 400, 800, 1000, 1000, 1000, 450]);
    expect(clock.sleeps.reduce((x, y) => x + y, 0)).toBe(5000);
    // Each poll re-read the value and re-tried the lock: the first attempt plus one per sleep.
    expect(store.log.filter((l) => l.startsWith('acquire')).length).toBe(1 + clock.sleeps.length);
    expect(fill).toHaveBeenCalledTimes(1);
    expect(a.metrics().total).toMatchObject({ lockContended: 1, lockTimeouts: 1, fills: 1 });
    // Filled locally without the lock: a plain write, not a fenced one.
    expect(store.log).toContain('setMany k');
  });

  it('a waiter takes over as soon as the dead holder’s lock expires (lockTtl)', async () => {
    const { store, a, clock } = replicas({ lockPollInterval: 50, lockWaitTimeout: 5000 });
    store.holdLock('k', 300); // holder killed: its lock expires after 300 ms
    const fill = jest.fn(async () => 'mine');
    expect(await a.getOrCompute('k', fill)).toBe('mine');
    expect(clock.sleeps).toEqual([50, 100, 200]);
    expect(a.metrics().total).toMatchObject({ lockAcquired: 1, lockTimeouts: 0 });
    expect(store.log.at(-1)).toBe('writeAndRelease k');
  });

  it('re-checks the value after acquiring: no fill when another replica wrote it in between', async () => {
    const { store, a } = replicas();
    const fill = jest.fn(async () => 'recomputed');
    const pending = a.getOrCompute('k', fill);
    // Written after a's read and before its lock attempt returns: getMany is a separate call.
    const originalGetMany = store.getMany.bind(store);
    store.getMany = async (keys) => {
      const result = await originalGetMany(keys);
      await store.entries.setMany([
        { key: 'k', entry: { value: 'theirs', freshUntil: Infinity, staleUntil: Infinity }, ttl: Infinity },
      ]);
      return result;
    };
    expect(await pending).toBe('theirs');
    expect(fill).not.toHaveBeenCalled();
    expect(store.log).toEqual(['acquire k', 'release k']);
    expect(store.locks.size).toBe(0);
  });

  it('releases the lock only after the write, and releases it on a failed fill', async () => {
    const { store, a } = replicas();
    const gate = deferred<string>();
    const pending = a.getOrCompute('k', () => gate.promise);
    await flush();
    expect(store.locks.has('k')).toBe(true); // held while filling
    gate.resolve('v');
    await pending;
    await flush();
    expect(store.log).toEqual(['acquire k', 'writeAndRelease k']);
    await expect(
      a.getOrCompute('e', async () => {
        throw new Error('fill failed');
      }),
    ).rejects.toThrow('fill failed');
    await flush();
    expect(store.log.slice(2)).toEqual(['acquire e', 'release e']);
    expect(store.locks.size).toBe(0);
  });

  it('a fenced write is refused when the lock expired meanwhile: callers still get the value', async () => {
    const { store, a, clock } = replicas({ lockTtl: 1000 });
    const gate = deferred<string>();
    const pending = a.getOrCompute('k', () => gate.promise);
    await flush();
    clock.advance(1500); // the filler paused past its lock's expiry; someone else may own the key now
    store.holdLock('k', 10_000, 'the-new-filler');
    gate.resolve('late value');
    expect(await pending).toBe('late value');
    await flush();
    expect(store.entries.getSync('k')).toBeUndefined();
  });

  it('invalidate removes the lock, so a fill that started before it writes nothing', async () => {
    const { store, a, b } = replicas();
    const gate = deferred<string>();
    let calls = 0;
    const fill = () => (++calls === 1 ? gate.promise : Promise.resolve('new'));
    const pending = a.getOrCompute('k', fill);
    await flush();
    await b.invalidate('k'); // another replica: a's flight is not abandoned, only its lock is gone
    gate.resolve('old');
    expect(await pending).toBe('old');
    await flush();
    expect(store.entries.getSync('k')).toBeUndefined();
    expect(await a.getOrCompute('k', fill)).toBe('new');
  });

  it('locks of one batch are tried in one call', async () => {
    const { store, a } = replicas();
    const users = a.loader<number, number>({ name: 'u', batch: async (ids) => ids });
    await users.loadMany([1, 2, 3]);
    expect(store.log).toEqual(['acquire u:1,u:2,u:3', 'writeAndRelease u:1,u:2,u:3']);
  });

  it('lock: false skips the lock (per loader and per call)', async () => {
    const { store, a } = replicas();
    const users = a.loader<number, number>({ name: 'u', batch: async (ids) => ids, lock: false });
    await users.load(1);
    await a.getOrCompute('k', async () => 1, { lock: false });
    expect(store.log).toEqual(['setMany u:1', 'setMany k']);
  });

  it('when the lock call fails the key is filled locally and the error counted', async () => {
    const { store, a } = replicas();
    store.failAcquire = true;
    expect(await a.getOrCompute('k', async () => 'computed anyway')).toBe('computed anyway');
    expect(a.metrics().total.storeErrors).toBe(1);
  });

  it('a lock call that fails after taking the locks (late reply) releases them: no orphan lock for others to wait on', async () => {
    const { store, a } = replicas();
    store.timeOutAfterAcquire = true;
    expect(await a.getOrCompute('k', async () => 'v')).toBe('v');
    await flush();
    expect(store.locks.size).toBe(0);
    expect(store.log).toEqual(['acquire k', 'release k', 'setMany k']);
  });

  it('a fenced write that fails releases the lock', async () => {
    const { store, a } = replicas();
    store.failWrite = true;
    expect(await a.getOrCompute('k', async () => 'v')).toBe('v');
    await flush();
    expect(store.locks.size).toBe(0);
    expect(a.metrics().total.storeErrors).toBe(1);
  });

  it('SWR: a replica that loses the refresh lock keeps serving stale and does not fill', async () => {
    const { store, a, b, clock } = replicas({ ttl: 1000, swr: 10_000 });
    await a.getOrCompute('k', async () => 'v1');
    clock.advance(2000);
    store.holdLock('k', 5000, 'replica-c'); // replica c is refreshing
    const fill = jest.fn(async () => 'v2');
    expect(await b.getOrCompute('k', fill)).toBe('v1');
    await flush(10);
    expect(fill).not.toHaveBeenCalled();
    expect(b.metrics().total).toMatchObject({ staleServed: 1, refreshes: 1, lockContended: 1 });
  });

  it('an abandoned waiter stops polling', async () => {
    const { store, a, clock } = replicas({ lockPollInterval: 50, lockWaitTimeout: 5000 });
    store.holdLock('k', 60_000);
    const controller = new AbortController();
    const fill = jest.fn(async () => 'x');
    const pending = a.getOrCompute('k', fill, { signal: controller.signal }).catch(() => 'aborted');
    await flush(3);
    controller.abort();
    expect(await pending).toBe('aborted');
    await flush(20);
    expect(clock.sleeps.length).toBeLessThan(4);
    expect(fill).not.toHaveBeenCalled();
  });
});

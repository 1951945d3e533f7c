/**
 * Issue 17's reduction, and the abort race it lives in: every call with a signal settles, whether
 * the signal is aborted before the call, while the load is in flight, or after it failed.
 */
import { getEventListeners } from 'node:events';
import { createCache } from '../../src/core';
import { raceAbort } from '../../src/core/abort-race';
import { deferred } from '../helpers';

const PENDING = Symbol('pending');

/** The promise's outcome after a few turns of the event loop, or PENDING if it has none by then. */
async function settledWithin<T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown } | typeof PENDING> {
  let outcome: { value: T } | { error: unknown } | typeof PENDING = PENDING;
  promise.then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = { error }),
  );
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  return outcome;
}

function aborted(reason = new Error('client left')): AbortSignal {
  const controller = new AbortController();
  controller.abort(reason);
  return controller.signal;
}

function failingUsers() {
  const cache = createCache();
  const users = cache.loader<string, string>({
    name: 'user',
    ttl: 60_000,
    batch: async (ids) => ids.map((id) => new Error(`no user ${id}`)),
  });
  return { cache, users };
}

describe('a call with an aborted signal settles', () => {
  it('raceAbort rejects at once for a signal aborted before the race, and tells the owner it left', async () => {
    const reason = new Error('gone');
    let left = 0;
    const failed = Promise.reject(new Error('the load failed'));
    failed.catch(() => {});
    await expect(settledWithin(raceAbort(failed, aborted(reason), () => left++))).resolves.toEqual({ error: reason });
    await expect(
      settledWithin(raceAbort(new Promise<never>(() => {}), aborted(reason), () => left++)),
    ).resolves.toEqual({ error: reason });
    expect(left).toBe(2);
  });

  it('raceAbort: the first of the outcome and the abort decides, the owner is told once', async () => {
    const d = deferred<string>();
    const controller = new AbortController();
    let left = 0;
    const race = raceAbort(d.promise, controller.signal, () => left++);
    controller.abort(new Error('first'));
    d.reject(new Error('second'));
    controller.abort(new Error('again'));
    const outcome = await settledWithin(race);
    expect(outcome).toEqual({ error: new Error('first') });
    expect(left).toBe(1);
  });

  it('a dependent signal (AbortSignal.any) aborted with its source settles the race', async () => {
    const source = new AbortController();
    const signal = AbortSignal.any([source.signal]);
    const d = deferred<string>();
    const race = raceAbort(d.promise, signal, () => {});
    source.abort(new Error('source'));
    expect(await settledWithin(race)).toEqual({ error: new Error('source') });
  });

  it("issue 17: a scoped load after the key failed in this request, with an aborted signal, rejects with the signal's reason", async () => {
    const { cache, users } = failingUsers();
    const loader = cache.request().loader(users);
    await expect(loader.load('1')).rejects.toThrow('no user 1');
    const reason = new Error('client left');
    expect(await settledWithin(loader.load('1', { signal: aborted(reason) }))).toEqual({ error: reason });
    const many = await settledWithin(loader.loadMany(['1', '2'], { signal: aborted(reason) }));
    expect(many).toEqual({ value: [reason, reason] });
  });

  it('issue 17, with the first load still in flight', async () => {
    const { cache, users } = failingUsers();
    const loader = cache.request().loader(users);
    const first = loader.load('1');
    first.catch(() => {});
    const reason = new Error('client left');
    const late = loader.load('1', { signal: aborted(reason) });
    expect(await settledWithin(late)).toEqual({ error: reason });
    await expect(first).rejects.toThrow('no user 1');
  });

  it('the same for a value held by the request, and for a signal aborted while the failed load is held', async () => {
    const cache = createCache();
    const users = cache.loader<string, string>({
      name: 'user',
      ttl: 60_000,
      batch: async (ids) => ids.map((id) => (id === 'bad' ? new Error('bad') : `v${id}`)),
    });
    const loader = cache.request().loader(users);
    await expect(loader.load('1')).resolves.toBe('v1');
    await expect(loader.load('bad')).rejects.toThrow('bad');
    const controller = new AbortController();
    const pendingValue = loader.load('1', { signal: controller.signal });
    const pendingError = loader.load('bad', { signal: controller.signal });
    controller.abort(new Error('later'));
    // Both were already known: the answer may be the value / error or the abort, but never pending.
    expect(await settledWithin(pendingValue)).not.toBe(PENDING);
    expect(await settledWithin(pendingError)).not.toBe(PENDING);
    expect(await settledWithin(loader.load('bad', { signal: aborted() }))).not.toBe(PENDING);
  });
});

describe("a request's signal (cache.request({ signal }), herdcacheContext({ signal }))", () => {
  function slowUsers() {
    const cache = createCache({ ttl: 60_000 });
    const gates: { ids: readonly string[]; signal: AbortSignal; release: () => void }[] = [];
    const users = cache.loader<string, string>({
      name: 'user',
      ttl: 60_000,
      batch: (ids, { signal }) =>
        new Promise((resolve) => {
          gates.push({ ids, signal, release: () => resolve(ids.map((id) => `user ${id}`)) });
        }),
    });
    return { cache, users, gates };
  }

  it('ends every wait of the request when it fires, and a fill only that request wanted is told to stop', async () => {
    const { cache, users, gates } = slowUsers();
    const client = new AbortController();
    const scope = cache.request({ signal: client.signal });
    const one = scope.loader(users).load('1');
    const many = scope.loader(users).loadMany(['1', '2']);
    const computed = scope.getOrCompute('k', () => new Promise<string>(() => {}), { ttl: 1000 });
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(gates).toHaveLength(1);
    const reason = new Error('client left');
    client.abort(reason);
    expect(await settledWithin(one)).toEqual({ error: reason });
    expect(await settledWithin(many)).toEqual({ value: [reason, reason] });
    expect(await settledWithin(computed)).toEqual({ error: reason });
    expect(gates[0]!.signal.aborted).toBe(true); // nobody else wanted users 1 and 2
    expect(cache.inFlight).toBe(0);
  });

  it("does not disturb another request waiting on the same fill; after it fired, the request's loads reject at once (a value held in process still answers read)", async () => {
    const { cache, users, gates } = slowUsers();
    const client = new AbortController();
    const leaving = cache.request({ signal: client.signal }).loader(users);
    const staying = cache.request().loader(users);
    const a = leaving.load('1');
    const b = staying.load('1');
    await new Promise<void>((resolve) => setImmediate(resolve));
    client.abort(new Error('gone'));
    expect(await settledWithin(a)).toEqual({ error: new Error('gone') });
    expect(gates[0]!.signal.aborted).toBe(false);
    gates[0]!.release();
    await expect(b).resolves.toBe('user 1');
    expect(await settledWithin(leaving.load('2'))).toEqual({ error: new Error('gone') });
    expect(await settledWithin(Promise.resolve(leaving.read('1')))).toEqual({ value: 'user 1' });
    expect(await settledWithin(Promise.resolve(leaving.read('3')))).toEqual({ error: new Error('gone') });
  });

  it("a load's own signal and the request's: whichever fires first ends the wait", async () => {
    const { cache, users } = slowUsers();
    const client = new AbortController();
    const own = new AbortController();
    const scoped = cache.request({ signal: client.signal }).loader(users);
    const first = scoped.load('1', { signal: own.signal });
    own.abort(new Error('own'));
    expect(await settledWithin(first)).toEqual({ error: new Error('own') });
    const second = scoped.load('2', { signal: new AbortController().signal });
    client.abort(new Error('request'));
    expect(await settledWithin(second)).toEqual({ error: new Error('request') });
  });

  it('refuses a signal that is not an AbortSignal, and unknown options, naming them', () => {
    const cache = createCache();
    expect(() => cache.request({ signal: 'no' as unknown as AbortSignal })).toThrow(/signal.*"no"/);
    expect(() => cache.request({ sginal: new AbortController().signal } as never)).toThrow(/sginal/);
  });
});

describe("a request's signal shared by many loads", () => {
  it('gets one abort listener for all of them (no MaxListenersExceededWarning), and aborting still rejects each', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const cache = createCache({ ttl: 60_000 });
      const never = deferred<string[]>();
      let batches = 0;
      const users = cache.loader<string, string>({
        name: 'user',
        batch: () => {
          batches++;
          return never.promise;
        },
      });
      const controller = new AbortController();
      const view = cache.request({ signal: controller.signal }).loader(users);
      const loads = Array.from({ length: 50 }, (_, i) => view.load(String(i)));
      const computed = Array.from({ length: 50 }, (_, i) =>
        cache.getOrCompute(`k${i}`, () => never.promise, { signal: controller.signal }),
      );
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(batches).toBe(1);
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
      const reason = new Error('client left');
      controller.abort(reason);
      const outcomes = await Promise.allSettled([...loads, ...computed]);
      expect(outcomes.every((o) => o.status === 'rejected' && o.reason === reason)).toBe(true);
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      await cache.close();
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a caller that settled before the abort is not woken by it', async () => {
    const controller = new AbortController();
    let left = 0;
    const value = await raceAbort(Promise.resolve('v'), controller.signal, () => left++);
    controller.abort(new Error('late'));
    expect(value).toBe('v');
    expect(left).toBe(0);
  });
});

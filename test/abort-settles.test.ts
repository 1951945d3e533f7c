/**
 * Issue 17's reduction, and the abort race it lives in: every call with a signal settles, whether
 * the signal is aborted before the call, while the load is in flight, or after it failed.
 */
import { createCache } from '../src/core';
import { raceAbort } from '../src/core/flight';
import { deferred } from './helpers';

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
  const users = cache.loader<string, string>({ name: 'user', ttl: 60_000, batch: async (ids) => ids.map((id) => new Error(`no user ${id}`)) });
  return { cache, users };
}

describe('a call with an aborted signal settles', () => {
  it('raceAbort rejects at once for a signal aborted before the race, and tells the owner it left', async () => {
    const reason = new Error('gone');
    let left = 0;
    const failed = Promise.reject(new Error('the load failed'));
    failed.catch(() => {});
    await expect(settledWithin(raceAbort(failed, aborted(reason), () => left++))).resolves.toEqual({ error: reason });
    await expect(settledWithin(raceAbort(new Promise<never>(() => {}), aborted(reason), () => left++))).resolves.toEqual({ error: reason });
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
    const users = cache.loader<string, string>({ name: 'user', ttl: 60_000, batch: async (ids) => ids.map((id) => (id === 'bad' ? new Error('bad') : `v${id}`)) });
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

/**
 * A fill's signal (FillContext.signal, a batch's BatchContext.signal) is made when first read: a
 * fill that never reads it costs no AbortController, and one that reads it after its callers left
 * gets it already aborted, as it would have been.
 */
import { createCache } from '../../src/core';
import { FillRun } from '../../src/core/fill-run';
import { deferred } from '../helpers';

/** Counts the AbortControllers made while `run` runs. */
async function controllersMadeBy(run: () => Promise<unknown>): Promise<number> {
  const Original = globalThis.AbortController;
  let made = 0;
  globalThis.AbortController = class extends Original {
    constructor() {
      super();
      made++;
    }
  };
  try {
    await run();
  } finally {
    globalThis.AbortController = Original;
  }
  return made;
}

describe("a fill's signal is made when read", () => {
  it('a getOrCompute fill and a batch that do not read it make no AbortController', async () => {
    const cache = createCache();
    const users = cache.loader<string, string>({ name: 'user', ttl: 60_000, batch: async (ids) => ids.map(String) });
    const made = await controllersMadeBy(async () => {
      expect(await cache.getOrCompute('k', async () => 1, { ttl: 60_000 })).toBe(1);
      expect(await Promise.all([users.load('1'), users.load('2')])).toEqual(['1', '2']);
    });
    expect(made).toBe(0);
  });

  it('read, it is one signal per call, live while a caller waits', async () => {
    const cache = createCache();
    const seen: AbortSignal[] = [];
    const made = await controllersMadeBy(async () => {
      await cache.getOrCompute(
        'k',
        async ({ signal }) => {
          seen.push(signal, signal);
          return 1;
        },
        { ttl: 60_000 },
      );
    });
    expect(made).toBe(1);
    expect(seen[0]).toBe(seen[1]);
    expect(seen[0]!.aborted).toBe(false);
  });

  it('read after every caller left: already aborted', async () => {
    const cache = createCache();
    const gate = deferred<void>();
    let context: { signal: AbortSignal } | undefined;
    const client = new AbortController();
    const load = cache.getOrCompute(
      'k',
      async (ctx) => {
        context = ctx;
        await gate.promise;
        return 1;
      },
      { ttl: 60_000, signal: client.signal },
    );
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(context).toBeDefined();
    const reason = new Error('client left');
    client.abort(reason);
    await expect(load).rejects.toBe(reason);
    const signal = context!.signal; // first read now
    expect(signal.aborted).toBe(true);
    gate.resolve();
  });

  it('the contexts are read by destructuring, as the types say (the signal is a getter)', async () => {
    const cache = createCache();
    const got: unknown[] = [];
    await cache.getOrCompute('k', async ({ key, signal }) => (got.push(key, signal), 1), { ttl: 60_000 });
    const users = cache.loader<string, string>({
      name: 'user',
      ttl: 60_000,
      batch: async (ids, { signal }) => (got.push(signal), ids.map(String)),
    });
    await users.load('1');
    expect(got[0]).toBe('k');
    expect(got[1]).toBeInstanceOf(AbortSignal);
    expect(got[2]).toBeInstanceOf(AbortSignal);
  });

  it('FillRun: aborted on the last release whether the signal was read before or after', () => {
    const before = new FillRun(2);
    const early = before.signal;
    before.release(new Error('a'));
    expect(early.aborted).toBe(false);
    before.release(new Error('b'));
    expect(early.aborted).toBe(true);
    expect(early.reason).toEqual(new Error('b'));
    const after = new FillRun(1);
    after.release(new Error('c'));
    expect(after.signal.aborted).toBe(true);
    expect(after.signal.reason).toEqual(new Error('c'));
    expect(after.signal).toBe(after.signal);
  });
});

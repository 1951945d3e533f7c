/**
 * Re-contending after invalidations is bounded (src/core/flight.ts, PATIENT_AFTER): a caller whose
 * flight is invalidated starts over, but a flight it reached through two abandonments is, when
 * invalidated once its fill runs, detached: its callers get its fill's result (not written), and
 * later callers start anew. Without the bound a fill that invalidates its own key restarted itself
 * in microtasks for ever (the process never reached a timer again), and a key written faster than
 * it fills never answered its reader. Counted: fills per caller, what is stored, who gets what.
 */
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { deferred, flush } from '../helpers';

it('a fill that invalidates its own key: 3 fills, the caller answered, timers still run', async () => {
  const cache = createCache({ ttl: 60_000 });
  let fills = 0;
  let timerRan = false;
  const timer = setTimeout(() => (timerRan = true), 0);
  const value = await cache.getOrCompute('user:1', async () => {
    fills++;
    if (fills > 50) throw new Error('unbounded'); // the defect: a fill per invalidation, for ever
    await cache.invalidate('user:1');
    return `v${fills}`;
  });
  expect(value).toBe('v3');
  expect(fills).toBe(3);
  await new Promise((resolve) => setTimeout(resolve, 5));
  clearTimeout(timer);
  expect(timerRan).toBe(true);
  // The detached fill's value was not written (its key was invalidated while it ran).
  expect(await cache.getOrCompute('user:1', async () => 'next')).toBe('next');
  expect(cache.inFlight).toBe(0);
  await cache.close();
});

it('a fill that invalidates a tag it carries: bounded the same way', async () => {
  const cache = createCache({ ttl: 60_000 });
  let fills = 0;
  const value = await cache.getOrCompute(
    'profile:42',
    async () => {
      fills++;
      if (fills > 50) throw new Error('unbounded');
      await new Promise((resolve) => setImmediate(resolve));
      await cache.invalidateTags(['User:42']);
      return `p${fills}`;
    },
    { tags: ['User:42'] },
  );
  expect([value, fills]).toEqual(['p3', 3]);
  await cache.close();
});

it('a key invalidated while each fill runs: the first caller restarts twice, then gets its third fill; a later caller starts anew', async () => {
  const cache = createCache({ ttl: 60_000 });
  const gates = [deferred<string>(), deferred<string>(), deferred<string>(), deferred<string>()];
  let fills = 0;
  const fill = () => gates[fills++]!.promise;
  const reader = cache.getOrCompute('stock:1', fill);
  let answer: string | undefined;
  void reader.then((v) => (answer = v));
  await flush();
  expect(fills).toBe(1);
  await cache.invalidate('stock:1'); // restart 1
  await flush();
  expect(fills).toBe(2);
  await cache.invalidate('stock:1'); // restart 2
  await flush();
  expect(fills).toBe(3);
  const joiner = cache.getOrCompute('stock:1', fill); // joins the third flight before it is invalidated
  await cache.invalidate('stock:1'); // the third flight is detached, not restarted
  await flush();
  expect(fills).toBe(3);
  // A caller arriving after that invalidation does not get the detached fill: it starts a fourth.
  const later = cache.getOrCompute('stock:1', fill);
  await flush();
  expect(fills).toBe(4);
  gates[0]!.resolve('v1'); // the abandoned ones end: nobody gets them
  gates[1]!.resolve('v2');
  await flush();
  expect(answer).toBeUndefined();
  gates[2]!.resolve('v3');
  expect(await reader).toBe('v3');
  expect(await joiner).toBe('v3');
  gates[3]!.resolve('v4');
  expect(await later).toBe('v4');
  // What is stored is the fourth fill's (started after the last invalidation), not the detached one's.
  expect(await cache.getOrCompute('stock:1', async () => 'unused')).toBe('v4');
  await cache.close();
});

it("a detached fill's failure reaches its callers and is not cached", async () => {
  const cache = createCache({ ttl: 60_000 });
  let fills = 0;
  const reader = cache.getOrCompute('k', async () => {
    fills++;
    await cache.invalidate('k');
    if (fills === 3) throw new Error('third failed');
    return 'v';
  });
  await expect(reader).rejects.toThrow('third failed');
  expect(fills).toBe(3);
  expect(await cache.getOrCompute('k', async () => 'after')).toBe('after');
  await cache.close();
});

it('a loader whose batch clears its own keys: 3 batch calls, then answered', async () => {
  const cache = createCache({ ttl: 60_000 });
  let batches = 0;
  const users = cache.loader<number, string>({
    name: 'user',
    batch: async (ids) => {
      batches++;
      if (batches > 50) throw new Error('unbounded');
      await new Promise((resolve) => setImmediate(resolve));
      for (const id of ids) void users.clear(id);
      return ids.map((id) => `u${id}#${batches}`);
    },
  });
  expect(await Promise.all([users.load(1), users.load(2)])).toEqual(['u1#3', 'u2#3']);
  expect(batches).toBe(3);
  await cache.close();
});

it('callers with a signal on a detached flight: answered by it; all leaving abort its fill', async () => {
  const cache = createCache({ ttl: 60_000, store: memoryStore() });
  const gate = deferred<string>();
  let fills = 0;
  let thirdSignal: AbortSignal | undefined;
  const fill = async ({ signal }: { signal: AbortSignal }) => {
    fills++;
    if (fills === 3) thirdSignal = signal;
    return gate.promise;
  };
  const leave = new AbortController();
  const reader = cache.getOrCompute('k', fill, { signal: leave.signal });
  const outcome = reader.then(
    (v) => v,
    (e: unknown) => e,
  );
  for (let i = 0; i < 3; i++) {
    await flush();
    await new Promise((resolve) => setImmediate(resolve)); // a starter with a signal restarts a turn later
    await flush();
    await cache.invalidate('k');
  }
  await flush();
  await new Promise((resolve) => setImmediate(resolve));
  expect(fills).toBe(3);
  expect(thirdSignal!.aborted).toBe(false); // detached: still wanted by its caller
  leave.abort(new Error('client left'));
  expect(((await outcome) as Error).message).toBe('client left');
  expect(thirdSignal!.aborted).toBe(true); // nobody waits for it any more
  gate.resolve('late');
  await flush();
  expect(cache.inFlight).toBe(0);
  await cache.close();
});

it('close() does not detach: the callers of a re-contended flight get E_CLOSED', async () => {
  const cache = createCache({ ttl: 60_000 });
  const gate = deferred<string>();
  let fills = 0;
  const reader = cache.getOrCompute('k', () => (fills++, gate.promise));
  for (let i = 0; i < 2; i++) {
    await flush();
    await cache.invalidate('k');
  }
  await flush();
  expect(fills).toBe(3);
  const closing = cache.close();
  await expect(reader).rejects.toMatchObject({ code: 'E_CLOSED' });
  gate.resolve('v');
  await closing;
});

it('close() reaches a detached flight: its fill is told to stop and its callers get E_CLOSED', async () => {
  const cache = createCache({ ttl: 60_000 });
  let fills = 0;
  let third: AbortSignal | undefined;
  // A fill that ends only when told to stop (a fetch given its signal).
  const fill = ({ signal }: { signal: AbortSignal }) => {
    fills++;
    if (fills === 3) third = signal;
    return new Promise<string>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
  };
  const reader = cache.getOrCompute('k', fill);
  const outcome = reader.then(
    () => 'resolved',
    (e: { code?: string }) => e.code,
  );
  for (let i = 0; i < 3; i++) {
    await flush();
    await cache.invalidate('k');
  }
  await flush();
  expect(fills).toBe(3); // the third flight is detached
  await cache.close();
  expect(await outcome).toBe('E_CLOSED');
  expect(third!.aborted).toBe(true);
});

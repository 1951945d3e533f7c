/**
 * A clock given to createCache is checked once, when the cache is made; one that throws (or reads
 * no time) later was read unguarded on the load path: the load hung, an unhandled rejection was
 * raised, and the key stayed in flight for good (later loads hung too). It is now read through a
 * guard (src/core/freshness.ts, guardedClock): the last good reading, one warning.
 */
import { createCache } from '../../src/core/cache';
import { CLOCK_WARNING } from '../../src/core/freshness';
import { captureWarnings, watchUnhandledRejections } from '../helpers';
import { LockingStore } from '../helpers/lock-store';

const warnings = captureWarnings();
const rejections = watchUnhandledRejections();

function flakyClock() {
  let failNext = false;
  let garbage = false;
  let t = 1_000_000;
  return {
    clock: {
      now(): number {
        if (failNext) {
          failNext = false;
          throw new Error('clock failed');
        }
        return garbage ? Number.NaN : t;
      },
    },
    failOnce: () => void (failNext = true),
    readGarbage: (on: boolean) => void (garbage = on),
    advance: (ms: number) => void (t += ms),
  };
}

it('a now() that throws once during a load: the load settles, the key is not wedged, one warning', async () => {
  const { clock, failOnce } = flakyClock();
  const cache = createCache({ ttl: 10_000, clock });
  let fills = 0;
  failOnce();
  expect(await cache.getOrCompute('k', async () => ++fills)).toBe(1);
  expect(await cache.getOrCompute('k', async () => ++fills)).toBe(1); // stored, a hit
  failOnce();
  expect(await cache.getOrCompute('other', async () => ++fills)).toBe(2);
  expect(cache.inFlight).toBe(0);
  await rejections.settled();
  expect(rejections.unhandled()).toEqual([]);
  expect(warnings.filter((w) => w.code === CLOCK_WARNING)).toHaveLength(1);
  await cache.close();
});

it('a now() that reads NaN: the last good reading is used (expiry still judged by it)', async () => {
  const { clock, readGarbage, advance } = flakyClock();
  const cache = createCache({ ttl: 1_000, clock });
  let fills = 0;
  expect(await cache.getOrCompute('k', async () => ++fills)).toBe(1);
  readGarbage(true);
  expect(await cache.getOrCompute('k', async () => ++fills)).toBe(1);
  readGarbage(false);
  advance(2_000);
  expect(await cache.getOrCompute('k', async () => ++fills)).toBe(2); // expired by the real reading
  await cache.close();
});

it('clock.sleep that is not a function is refused, naming it', () => {
  expect(() => createCache({ clock: { now: () => 1, sleep: 5 as never } })).toThrow(
    expect.objectContaining({ code: 'E_INVALID_OPTION', message: expect.stringMatching(/"clock\.sleep".*5/) }),
  );
});

it('a clock whose sleep() rejects during a lock wait: the wait goes on on a real timer, the load settles', async () => {
  let now = 1_000_000;
  const store = new LockingStore({ now: () => now });
  store.locks.set('k', { token: 'another replica', until: now + 60_000 }); // held elsewhere: the load waits
  let sleeps = 0;
  const clock = {
    now: () => now,
    sleep: async (ms: number) => {
      sleeps++;
      now += ms;
      throw new Error('sleep failed');
    },
  };
  const cache = createCache({ ttl: 60_000, store, clock, lockWaitTimeout: 200 });
  expect(await cache.getOrCompute('k', async () => 'v')).toBe('v'); // filled past lockWaitTimeout
  expect(sleeps).toBeGreaterThan(0);
  expect(cache.inFlight).toBe(0);
  await rejections.settled();
  expect(rejections.unhandled()).toEqual([]);
  await cache.close();
});

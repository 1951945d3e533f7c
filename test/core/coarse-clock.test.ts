import { createCache, systemClock } from '../../src/core';
import { CLOCK_MAX_READS, CLOCK_RESOLUTION_MS, CoarseClock } from '../../src/core/freshness';

describe('CoarseClock (the clock hits read when no clock is given)', () => {
  it('answers one reading for at most CLOCK_MAX_READS reads, even when no timer can run', () => {
    let t = 1_000;
    let reads = 0;
    const clock = new CoarseClock(() => {
      reads++;
      return t;
    });
    expect(clock.now()).toBe(1_000);
    t = 1_100; // 100 ms pass in one synchronous stretch: the timer that drops the reading cannot run
    for (let i = 1; i < CLOCK_MAX_READS; i++) expect(clock.now()).toBe(1_000);
    expect(clock.now()).toBe(1_100);
    expect(reads).toBe(2);
  });

  it('drops the reading once timers run CLOCK_RESOLUTION_MS after it', async () => {
    let t = 1_000;
    const clock = new CoarseClock(() => t);
    expect(clock.now()).toBe(1_000);
    t = 1_005;
    expect(clock.now()).toBe(1_000);
    // A timer due later than the clock's own: it runs after the reading was dropped.
    await new Promise((resolve) => setTimeout(resolve, CLOCK_RESOLUTION_MS + 4));
    expect(clock.now()).toBe(1_005);
  });
});

describe('a cache without a clock judges hits by the coarse clock, within its bound', () => {
  const T = 1_700_000_000_000;
  beforeEach(() => {
    // Date and setTimeout move only when the test says; the tick (nextTick) runs as usual.
    jest.useFakeTimers({ now: T, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('an entry expired more than the resolution ago is served by at most CLOCK_MAX_READS - 1 more hits of the old reading', async () => {
    const cache = createCache({ ttl: 100 });
    let fills = 0;
    const fill = async () => ++fills;
    expect(await cache.getOrCompute('k', fill)).toBe(1); // fresh until T + 100
    expect(await cache.getOrCompute('k', fill)).toBe(1); // a hit: reads the clock (T)
    jest.setSystemTime(T + 150); // expired 50 ms ago, and no timer has run
    let servedOld = 0;
    for (let i = 0; i < CLOCK_MAX_READS; i++) if ((await cache.getOrCompute('k', fill)) === 1) servedOld++;
    // The reading taken at T judged CLOCK_MAX_READS hits in all (the one above and these), no more.
    expect(servedOld).toBe(CLOCK_MAX_READS - 1);
    expect(fills).toBe(2);
    expect(cache.metrics().total).toMatchObject({ hits: CLOCK_MAX_READS, misses: 2 });
  });

  it('once timers run past the resolution, the next hit reads the time again', async () => {
    const cache = createCache({ ttl: 100 });
    let fills = 0;
    const fill = async () => ++fills;
    await cache.getOrCompute('k', fill);
    expect(await cache.getOrCompute('k', fill)).toBe(1); // a hit: reads the clock (T)
    jest.advanceTimersByTime(150); // time moves and timers run: the reading is dropped
    expect(await cache.getOrCompute('k', fill)).toBe(2); // expired: a miss, filled again
    expect(fills).toBe(2);
  });

  it('an injected clock is read on every hit (clock: systemClock reads Date.now() each time)', async () => {
    const cache = createCache({ ttl: 100, clock: systemClock });
    let fills = 0;
    const fill = async () => ++fills;
    await cache.getOrCompute('k', fill);
    expect(await cache.getOrCompute('k', fill)).toBe(1);
    jest.setSystemTime(T + 150);
    expect(await cache.getOrCompute('k', fill)).toBe(2);
  });
});

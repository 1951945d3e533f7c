import { jitteredTtl, manualClock } from '../../src/core';

describe('jitteredTtl', () => {
  it('stays within [base*(1-f), base*(1+f)] and varies', () => {
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const ttl = jitteredTtl(100_000, 0.2);
      expect(ttl).toBeGreaterThanOrEqual(80_000);
      expect(ttl).toBeLessThanOrEqual(120_000);
      seen.add(ttl);
    }
    expect(seen.size).toBeGreaterThan(100);
  });

  it('clamps the fraction to [0, 1]', () => {
    for (let i = 0; i < 100; i++) {
      const ttl = jitteredTtl(10_000, 5);
      expect(ttl).toBeGreaterThanOrEqual(0);
      expect(ttl).toBeLessThanOrEqual(20_000);
    }
    expect(jitteredTtl(10_000, -3)).toBe(10_000);
  });

  it('a zero or non-finite fraction means no jitter', () => {
    expect(jitteredTtl(10_000, 0)).toBe(10_000);
    expect(jitteredTtl(10_000, NaN)).toBe(10_000);
    expect(jitteredTtl(10_000, Infinity)).toBe(10_000);
    expect(jitteredTtl(Infinity, 0.5)).toBe(Infinity);
  });
});

describe('manualClock', () => {
  it('moves only when told, and its sleep advances time and records the wait', async () => {
    const clock = manualClock(1000);
    expect(clock.now()).toBe(1000);
    clock.advance(5);
    await clock.sleep(20);
    expect(clock.now()).toBe(1025);
    expect(clock.sleeps).toEqual([20]);
  });
});

import { jitteredTtl, manualClock } from '../../src/core';
import { MAX_DURATION } from '../../src/core/options';

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

  it('keeps a zero base, and a zero fraction means no jitter', () => {
    expect(jitteredTtl(0, 0.5)).toBe(0);
    expect(jitteredTtl(10_000, 0)).toBe(10_000);
    const ttl = jitteredTtl(MAX_DURATION, 1);
    expect(ttl).toBeGreaterThanOrEqual(0);
    expect(ttl).toBeLessThanOrEqual(2 * MAX_DURATION);
  });

  it('clamps the fraction to [0, 1]', () => {
    for (let i = 0; i < 100; i++) {
      const ttl = jitteredTtl(10_000, 5);
      expect(ttl).toBeGreaterThanOrEqual(0);
      expect(ttl).toBeLessThanOrEqual(20_000);
    }
    expect(jitteredTtl(10_000, -3)).toBe(10_000);
  });

  it('a non-finite fraction means no jitter; an infinite base stays infinite (ttl: Infinity is valid)', () => {
    expect(jitteredTtl(10_000, NaN)).toBe(10_000);
    expect(jitteredTtl(10_000, Infinity)).toBe(10_000);
    expect(jitteredTtl(Infinity, 0.5)).toBe(Infinity);
  });

  // NaN, -5 and '5' came back as NaN, -5 and 5: a ttl no store can keep.
  it.each([
    ['base', NaN, 0.1, 'NaN'],
    ['base', -5, 0.1, '-5'],
    ['base', '5', 0.1, '"5"'],
    ['base', MAX_DURATION * 2, 0.1, String(MAX_DURATION * 2)],
    ['fraction', 10_000, '0.1', '"0.1"'],
  ])('refuses %s in jitteredTtl(%p, %p) with E_INVALID_ARGUMENT', (name, base, fraction, shown) => {
    expect(() => jitteredTtl(base as number, fraction as number)).toThrow(
      expect.objectContaining({
        code: 'E_INVALID_ARGUMENT',
        message: expect.stringContaining(`argument "${name}" must be`),
      }),
    );
    expect(() => jitteredTtl(base as number, fraction as number)).toThrow(`got ${shown}`);
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

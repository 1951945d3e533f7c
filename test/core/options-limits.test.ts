/**
 * Options that cannot work are refused at creation, naming the option and the value; an async
 * hook that rejects is ignored as a throwing one is; a fill that returns an Error fails like one
 * that throws it (never cached), on every path.
 */
import { createCache } from '../../src/core/cache';
import { HerdcacheError } from '../../src/core/errors';
import { MAX_DURATION } from '../../src/core/options';

function refusal(create: () => unknown): { code?: string; message: string } {
  try {
    create();
  } catch (error) {
    expect(error).toBeInstanceOf(HerdcacheError);
    return error as HerdcacheError;
  }
  throw new Error('not refused');
}

describe('durations that no store can keep are refused at creation', () => {
  it.each([
    ['ttl', 1e19, '10000000000000000000'],
    ['ttl', MAX_DURATION + 1, String(MAX_DURATION + 1)],
    ['swr', 1e16, '10000000000000000'],
    ['lockTtl', Infinity, 'Infinity'],
    ['lockTtl', 1e19, '10000000000000000000'],
    ['lockWaitTimeout', Infinity, 'Infinity'],
    ['lockPollInterval', 2 ** 31, String(2 ** 31)],
    ['lockPollInterval', Infinity, 'Infinity'],
  ])('createCache({ %s: %p })', (name, value, shown) => {
    const error = refusal(() => createCache({ [name]: value, ...(name === 'swr' ? { ttl: 1000 } : {}) }));
    expect(error.code).toBe('E_INVALID_OPTION');
    expect(error.message).toContain(`"${name}"`);
    expect(error.message).toContain(shown);
  });

  it('per loader and per call too', async () => {
    const cache = createCache();
    expect(refusal(() => cache.loader({ name: 'l', batch: (keys) => keys, ttl: 1e19 })).message).toContain('"ttl"');
    await expect(cache.getOrCompute('k', () => 1, { ttl: 1e19 })).rejects.toMatchObject({ code: 'E_INVALID_OPTION' });
  });

  it('Infinity (never stale, no expiry) and the largest finite durations are accepted', () => {
    expect(() => createCache({ ttl: Infinity, swr: Infinity })).not.toThrow();
    expect(() =>
      createCache({
        ttl: MAX_DURATION,
        swr: MAX_DURATION,
        lockTtl: MAX_DURATION,
        lockWaitTimeout: MAX_DURATION,
        lockPollInterval: 2 ** 31 - 1,
      }),
    ).not.toThrow();
  });
});

describe('the clock is read once at creation: an answer that is not a finite number is refused', () => {
  // Such a clock dated every entry NaN (never fresh, never stale) and failed no call to say so.
  it.each([NaN, Infinity, -Infinity, '1000', undefined, null])('now() returning %p', (answer) => {
    const error = refusal(() => createCache({ clock: { now: () => answer as number } }));
    expect(error.code).toBe('E_INVALID_OPTION');
    expect(error.message).toContain('option "clock" must be an object whose now() returns a finite number');
    expect(error.message).toContain(`it returned ${answer === '1000' ? '"1000"' : String(answer)}`);
  });

  it('a clock without a now() function was refused already; a finite now() is accepted', () => {
    for (const clock of [{}, { now: 5 }, null]) {
      expect(refusal(() => createCache({ clock: clock as never })).message).toContain(
        'option "clock" must be an object with a now() method',
      );
    }
    expect(() => createCache({ clock: { now: () => -5 } })).not.toThrow();
  });
});

it('an async hook that rejects is ignored: no unhandled rejection, the loads go on', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    // Hooks are typed to return void; a user's async hook returns a rejected promise anyway.
    const failing = (async (): Promise<void> => {
      throw new Error('hook failed');
    }) as () => void;
    const cache = createCache({ ttl: 1000, hooks: { onMiss: failing, onFill: failing, onHit: failing } });
    // A second set: the hooks are then fanned out, another path.
    cache.observe({ onMiss: failing });
    expect(await cache.getOrCompute('k', () => 1)).toBe(1);
    expect(await cache.getOrCompute('k', () => 2)).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(unhandled).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

describe('a fill that returns an Error fails like one that throws it', () => {
  it('getOrCompute: every caller gets that Error, nothing is cached, the next call fills again', async () => {
    const cache = createCache({ ttl: 60_000 });
    const returned = new Error('not found upstream');
    let fills = 0;
    const fill = async (): Promise<unknown> => {
      fills++;
      return returned;
    };
    const [a, b] = await Promise.allSettled([cache.getOrCompute('k', fill), cache.getOrCompute('k', fill)]);
    expect(a).toEqual({ status: 'rejected', reason: returned });
    expect(b).toEqual({ status: 'rejected', reason: returned });
    expect(fills).toBe(1);
    expect(await cache.getOrCompute('k', () => 'value')).toBe('value');
    expect(cache.metrics().total.fillFailures).toBe(1);
  });

  it('a loader: an Error in the batch result, the same rule', async () => {
    const cache = createCache({ ttl: 60_000 });
    const returned = new Error('row missing');
    let calls = 0;
    const loader = cache.loader<string, string | Error>({
      name: 'row',
      batch: (keys) => {
        calls++;
        return keys.map((key) => (calls === 1 ? returned : key));
      },
    });
    await expect(loader.load('a')).rejects.toBe(returned);
    expect(await loader.load('a')).toBe('a');
  });
});

describe('jitter outside [0, 1] and null options are refused, naming the option', () => {
  it.each([2, -0.1, NaN, Infinity])('jitter %p', (jitter) => {
    const error = refusal(() => createCache({ jitter }));
    expect(error.code).toBe('E_INVALID_OPTION');
    expect(error.message).toMatch(/option "jitter" must be a number in \[0, 1\], got/);
    expect(error.message).toContain(String(jitter));
  });

  it('jitter 0 and 1 are accepted, also per call and per loader', async () => {
    const cache = createCache({ jitter: 1 });
    await expect(cache.getOrCompute('k', () => 1, { ttl: 5, jitter: 0 })).resolves.toBe(1);
    await expect(cache.getOrCompute('k2', () => 1, { ttl: 5, jitter: 2 })).rejects.toThrow(/option "jitter"/);
    expect(() => cache.loader({ name: 'l', batch: (keys: readonly string[]) => keys, jitter: -1 })).toThrow(
      /option "jitter"/,
    );
  });

  // One rule: only undefined (a key left out) means "the default"; null is a value, refused.
  it.each([
    'ttl',
    'swr',
    'jitter',
    'lock',
    'hooks',
    'maxRefreshes',
    'lockTtl',
    'lockWaitTimeout',
    'lockPollInterval',
    'clock',
    'store',
  ])('%s: null', (name) => {
    const error = refusal(() => createCache({ [name]: null } as object));
    expect(error.code).toBe('E_INVALID_OPTION');
    expect(error.message).toContain(`"${name}"`);
    expect(error.message).toContain('got null');
  });
});

/**
 * The Redis store against a real redis-server: options, reads, writes, codec faults, key layout,
 * delete and clear. The fill lock has its own file (lock.test.ts).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { HerdcacheError } from '../../src/core/errors';
import { jsonCodec } from '../../src/redis/codec';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { binaryCodec, connect, entry, randomPrefix, recordingReporter, sleep, type RecordingReporter } from './helpers';

let client: Redis;
let prefix: string;
let store: RedisStore;
let reporter: RecordingReporter;

beforeAll(async () => {
  client = await connect();
});

afterAll(async () => {
  await client.quit();
});

/**
 * These tests are about what the store does, not how fast: a loaded machine (a shared CI runner)
 * can hold a reply past the default 250 ms. Timeouts have their own tests (faults.test.ts).
 */
const patient = { commandTimeout: 10_000 } as const;

beforeEach(() => {
  prefix = randomPrefix('store');
  store = redisStore({ client, prefix, ...patient });
  reporter = recordingReporter();
  store.bind(reporter);
});

const valueKey = (key: string): string => `${prefix}{${key}}`;
const lockKey = (key: string): string => `${prefix}{${key}}:lock`;

describe('options', () => {
  it('names the option and the bad value', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ client: {} }, 'client'],
      [{ client, prefix: 'a{b' }, 'prefix'],
      [{ client, prefix: 'a}b' }, 'prefix'],
      [{ client, commandTimeout: 0 }, 'commandTimeout'],
      [{ client, commandTimeout: Infinity }, 'commandTimeout'],
      [{ client, maxKeyLength: 10 }, 'maxKeyLength'],
      [{ client, maxKeyLength: 100.5 }, 'maxKeyLength'],
      [{ client, maxKeyLength: 1e20 }, 'maxKeyLength'],
      [{ client, maxKeyLength: 1025 }, 'maxKeyLength'],
      [{ client, codec: { ...jsonCodec, binary: 'yes' } }, 'codec.binary'],
      [{ client, codec: { encode: () => '' } }, 'codec'],
      [{ client, breaker: true }, 'breaker'],
      [{ client, breaker: { threshold: 0 } }, 'breaker.threshold'],
      [{ client, breaker: { coolDown: -1 } }, 'breaker.coolDown'],
      [{ client, breaker: { coolDown: 500, maxCoolDown: 400 } }, 'breaker.maxCoolDown'],
      [{ client, breaker: { maxCoolDown: Infinity } }, 'breaker.maxCoolDown'],
      [{ client, breaker: { maxCoolDown: null } }, 'breaker.maxCoolDown'],
      [{ client, breaker: { coolDown: null } }, 'breaker.coolDown'],
    ];
    expect.assertions(cases.length * 2);
    for (const [options, name] of cases) {
      try {
        redisStore(options as never);
      } catch (error) {
        expect(error).toMatchObject({ code: 'E_INVALID_OPTION' });
        expect((error as Error).message).toContain(`"${name}"`);
      }
    }
  });

  it('maxKeyLength up to 1024 (longer keys never reach a store), a boolean binary', () => {
    expect(() => redisStore({ client, maxKeyLength: 1024 })).not.toThrow();
    expect(() => redisStore({ client, codec: { ...jsonCodec, binary: false } })).not.toThrow();
    expect(() => redisStore({ client, maxKeyLength: 1e20 })).toThrow(
      /must be an integer from 65 .* to 1024 .*got 100000000000000000000/,
    );
  });

  it("an empty prefix only beside the client's own keyPrefix (clear() would remove other applications' keys)", async () => {
    expect(() => redisStore({ client, prefix: '' })).toThrow(
      /option "prefix" must be a non-empty string, unless the client has a keyPrefix .*got ""/,
    );
    const prefixed = await connect(undefined, { keyPrefix: `${randomPrefix('empty-prefix')}` });
    try {
      // A clear scans the whole database here (the client's keyPrefix is the only bound): not a
      // test of timeouts, so a starved machine's slow SCAN pages do not fail it.
      const own = redisStore({ client: prefixed, prefix: '', commandTimeout: 10_000 });
      const other = `{other-app}:${randomPrefix('x')}`;
      await client.set(other, '1');
      await own.setMany([{ key: 'k', entry: entry(1), ttl: 60_000 }]);
      await own.clear();
      expect(await own.getMany(['k'])).toEqual([undefined]);
      expect(await client.get(other)).toBe('1'); // outside the client's keyPrefix: untouched
      await client.del(other);
    } finally {
      prefixed.disconnect();
    }
  });

  it('the client given as the options (redisStore(client)): said so, not "unknown option"', () => {
    expect(() => redisStore(client as never)).toThrow(
      /argument "options" must be an object with a "client": redisStore\(\{ client \}\), not redisStore\(client\)/,
    );
  });

  it('a closed client (quit) is said, not refused: loads are computed without the cache', async () => {
    const closed = await connect();
    await closed.quit();
    for (let i = 0; i < 1000 && closed.status !== 'end'; i++) await sleep(5); // up to 5 s on a starved machine
    expect(closed.status).toBe('end');
    const warned: string[] = [];
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation(((_w: string, o?: { code?: string }) => {
      warned.push(o?.code ?? '');
    }) as typeof process.emitWarning);
    try {
      const cache = createCache({ ttl: 60_000, store: redisStore({ client: closed, breaker: false }) });
      expect(await cache.getOrCompute('k', () => 'computed')).toBe('computed');
      expect(cache.metrics().total.storeErrors).toBeGreaterThan(0);
      await cache.close();
    } finally {
      spy.mockRestore();
    }
    expect(warned).toContain('HERDCACHE_REDIS_CLOSED');
  });

  it('accepts the defaults, and breaker: false', () => {
    expect(redisStore({ client }).breakerState).toBe('closed');
    expect(redisStore({ client, breaker: false }).breakerState).toBe('disabled');
    expect(redisStore({ client }).name).toBe('redis');
  });
});

describe('getMany / setMany', () => {
  it('round-trips entries, aligned with the keys, misses as undefined', async () => {
    const a = entry({ id: 1, tags: ['x'] });
    const b = entry('text');
    await store.setMany([
      { key: 'a', entry: a, ttl: 60_000 },
      { key: 'b', entry: b, ttl: 60_000 },
    ]);
    expect(await store.getMany(['b', 'missing', 'a'])).toEqual([b, undefined, a]);
    expect(await store.getMany([])).toEqual([]);
  });

  it('stores under prefix{key} with the format version inside the payload', async () => {
    await store.setMany([{ key: 'k', entry: entry(42, 1000, 2000), ttl: 60_000 }]);
    expect(JSON.parse((await client.get(valueKey('k')))!)).toEqual({ v: 1, f: 1000, s: 2000, d: 42 });
  });

  it('carries the fill time (early refresh) when the entry has one', async () => {
    const timed = { ...entry('v'), fillMs: 37 };
    await store.setMany([{ key: 'timed', entry: timed, ttl: 60_000 }]);
    expect(await store.getMany(['timed'])).toEqual([timed]);
    const [attempt] = await store.lock.acquire(['timed'], 't', 1000);
    expect(attempt!.entry).toEqual(timed);
  });

  it('applies PX from the write ttl, and no expiry for Infinity', async () => {
    await store.setMany([
      { key: 'short', entry: entry(1), ttl: 30_000 },
      { key: 'forever', entry: entry(2, Infinity, Infinity), ttl: Infinity },
      { key: 'fraction', entry: entry(3), ttl: 0.2 },
    ]);
    const pttl = await client.pttl(valueKey('short'));
    expect(pttl).toBeGreaterThan(29_000);
    expect(pttl).toBeLessThanOrEqual(30_000);
    expect(await client.pttl(valueKey('forever'))).toBe(-1);
    // A ttl under 1 ms is rounded up to PX 1 (PX 0 is a Redis error), so it expires at once.
    await sleep(10);
    expect(await client.exists(valueKey('fraction'))).toBe(0);
  });

  it('round-trips Infinity freshness (JSON has no Infinity)', async () => {
    const forever = entry('v', Infinity, Infinity);
    const freshForever = entry('w', 5000, Infinity);
    await store.setMany([
      { key: 'inf', entry: forever, ttl: Infinity },
      { key: 'half', entry: freshForever, ttl: Infinity },
    ]);
    expect(await store.getMany(['inf', 'half'])).toEqual([forever, freshForever]);
  });

  it.each([
    ['garbage', 'not json at all {'],
    ['a foreign format', JSON.stringify({ hello: 'world' })],
    ['an old format version', JSON.stringify({ v: 0, f: null, s: null, d: 1 })],
    ['a future format version', JSON.stringify({ v: 2, f: null, s: null, d: 1 })],
    ['a malformed entry', JSON.stringify({ v: 1, f: 'soon', s: null, d: 1 })],
    ['an entry without a value', JSON.stringify({ v: 1, f: null, s: null })],
    ['a JSON array', '[1,2,3]'],
  ])('reads %s as a miss, reports it, and lets the next write overwrite it', async (_label, raw) => {
    await client.set(valueKey('bad'), raw);
    await store.setMany([{ key: 'good', entry: entry(1), ttl: 60_000 }]);
    const [bad, good] = await store.getMany(['bad', 'good']);
    expect(bad).toBeUndefined();
    expect(good?.value).toBe(1);
    expect(reporter.decodeErrors).toHaveLength(1);
    expect(reporter.decodeErrors[0]!.key).toBe('bad');
    expect(reporter.decodeErrors[0]!.error).toMatchObject({ code: 'E_STORE_DECODE' });
    const fixed = entry('fixed');
    await store.setMany([{ key: 'bad', entry: fixed, ttl: 60_000 }]);
    expect(await store.getMany(['bad'])).toEqual([fixed]);
    expect(reporter.decodeErrors).toHaveLength(1);
  });

  it('skips and reports a value that cannot be encoded; the other writes land', async () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    await store.setMany([
      { key: 'big', entry: entry(10n), ttl: 60_000 },
      { key: 'ok', entry: entry('fine'), ttl: 60_000 },
      { key: 'cycle', entry: entry(cycle), ttl: 60_000 },
      { key: 'fn', entry: entry(() => 1), ttl: 60_000 },
    ]);
    expect(reporter.encodeErrors.map((e) => e.key)).toEqual(['big', 'cycle', 'fn']);
    for (const { error } of reporter.encodeErrors) expect(error).toMatchObject({ code: 'E_STORE_ENCODE' });
    expect((await store.getMany(['big', 'ok', 'cycle', 'fn'])).map((e) => e?.value)).toEqual([
      undefined,
      'fine',
      undefined,
      undefined,
    ]);
    expect(await client.exists(valueKey('big'), valueKey('cycle'), valueKey('fn'))).toBe(0);
  });

  it('does not throw when nothing is encodable, and reports nothing before bind', async () => {
    const unbound = redisStore({ client, prefix, ...patient });
    await expect(unbound.setMany([{ key: 'x', entry: entry(1n), ttl: 1000 }])).resolves.toBeUndefined();
    await client.set(valueKey('x'), 'garbage');
    await expect(unbound.getMany(['x'])).resolves.toEqual([undefined]);
  });

  it('does not let a throwing reporter fail the call', async () => {
    store.bind({
      encodeError() {
        throw new Error('hook');
      },
      decodeError() {
        throw new Error('hook');
      },
    });
    await client.set(valueKey('x'), 'garbage');
    await expect(store.getMany(['x'])).resolves.toEqual([undefined]);
    await expect(store.setMany([{ key: 'y', entry: entry(1n), ttl: 1000 }])).resolves.toBeUndefined();
  });

  it('takes a pluggable codec, binary ones included', async () => {
    const s = redisStore({ client, prefix, codec: binaryCodec, ...patient });
    s.bind(reporter);
    await s.setMany([{ key: 'b', entry: entry({ n: 1 }), ttl: 60_000 }]);
    expect(await s.getMany(['b'])).toEqual([entry({ n: 1 }, Infinity, Infinity)]);
    expect((await client.getBuffer(valueKey('b')))![0]).toBe(0xff);
    const [attempt] = await s.lock.acquire(['b'], 't', 1000);
    expect(attempt).toEqual({ won: true, entry: entry({ n: 1 }, Infinity, Infinity) });
  });
});

describe('keys', () => {
  it('hashes keys longer than maxKeyLength and keeps a readable head; they still work', async () => {
    const s = redisStore({ client, prefix, maxKeyLength: 100, ...patient });
    const long = 'user:'.padEnd(5000, 'x');
    const other = 'user:'.padEnd(5000, 'x') + 'y';
    await s.setMany([
      { key: long, entry: entry('a'), ttl: 60_000 },
      { key: other, entry: entry('b'), ttl: 60_000 },
    ]);
    expect((await s.getMany([long, other])).map((e) => e?.value)).toEqual(['a', 'b']);
    const stored = await client.keys(`${prefix}*`);
    expect(stored).toHaveLength(2);
    for (const key of stored) {
      expect(key.startsWith(`${prefix}{user:xxx`)).toBe(true);
      expect(key.length).toBe(prefix.length + 2 + 100);
    }
    const [attempt] = await s.lock.acquire([long], 'tok', 1000);
    expect(attempt).toEqual({ won: true, entry: expect.objectContaining({ value: 'a' }) });
    expect(await s.lock.writeAndRelease([{ key: long, entry: entry('c'), ttl: 1000 }], 'tok')).toEqual([true]);
    expect((await s.getMany([long]))[0]?.value).toBe('c');
  });

  it('keeps keys with braces, empty keys and keys starting with "}" apart and working', async () => {
    const keys = ['', '}', '}x', 'a}b', '{a}', 'a{b}c', 'ü€😀'];
    await store.setMany(keys.map((key, i) => ({ key, entry: entry(i), ttl: 60_000 })));
    expect((await store.getMany(keys)).map((e) => e?.value)).toEqual(keys.map((_, i) => i));
    const attempts = await store.lock.acquire(keys, 'tok', 1000);
    expect(attempts.map((a) => a.won)).toEqual(keys.map(() => true));
    expect(
      await store.lock.writeAndRelease(
        keys.map((key) => ({ key, entry: entry(key), ttl: 60_000 })),
        'tok',
      ),
    ).toEqual(keys.map(() => true));
    expect((await store.getMany(keys)).map((e) => e?.value)).toEqual(keys);
  });

  it('uses the client keyPrefix consistently, clear() included', async () => {
    const prefixed = await connect(undefined, { keyPrefix: 'outer:' });
    try {
      const s = redisStore({ client: prefixed, prefix, ...patient });
      await s.setMany([{ key: 'k', entry: entry(1), ttl: 60_000 }]);
      expect(await client.exists(`outer:${valueKey('k')}`)).toBe(1);
      await s.lock.acquire(['k'], 'tok', 60_000);
      expect(await client.get(`outer:${lockKey('k')}`)).toBe('tok');
      await s.clear();
      expect(await client.exists(`outer:${valueKey('k')}`, `outer:${lockKey('k')}`)).toBe(0);
    } finally {
      await prefixed.quit();
    }
  });
});

describe('delete / clear', () => {
  it('delete removes values and locks of the given keys only', async () => {
    await store.setMany(['a', 'b'].map((key) => ({ key, entry: entry(key), ttl: 60_000 })));
    await store.lock.acquire(['a', 'b'], 'tok', 10_000);
    await store.delete(['a']);
    expect(await client.exists(valueKey('a'), lockKey('a'))).toBe(0);
    expect(await client.exists(valueKey('b'), lockKey('b'))).toBe(2);
  });

  it('clear removes every key under the prefix (SCAN, many pages) and nothing else', async () => {
    const neighbour = redisStore({ client, prefix: `${prefix}more:`, ...patient });
    const glob = redisStore({ client, prefix: `${prefix}*[?]\\`, ...patient });
    const keys = Array.from({ length: 2500 }, (_, i) => `k${i}`);
    await store.setMany(keys.map((key) => ({ key, entry: entry(1), ttl: 60_000 })));
    await store.lock.acquire(['k1'], 'tok', 60_000);
    await neighbour.setMany([{ key: 'n', entry: entry(1), ttl: 60_000 }]);
    await glob.setMany([{ key: 'g', entry: entry(1), ttl: 60_000 }]);
    await client.set(`${prefix}unrelated`, 'x');
    await store.clear();
    expect(await client.keys(`${prefix}{*`)).toEqual([]);
    expect(await client.exists(`${prefix}more:{n}`, `${prefix}unrelated`, `${prefix}*[?]\\{g}`)).toBe(3);
    await glob.clear();
    expect(await client.exists(`${prefix}more:{n}`, `${prefix}*[?]\\{g}`)).toBe(1);
  });
});

it('raises coded errors for Redis errors', async () => {
  await client.hset(valueKey('hash'), 'f', 'v');
  const s = redisStore({ client, prefix, breaker: false, ...patient });
  // A key of another type under the prefix reads as missing, in MGET and in the lock script alike.
  await expect(s.getMany(['hash'])).resolves.toEqual([undefined]);
  await expect(s.lock.acquire(['hash'], 't', 1000)).resolves.toEqual([{ won: true, entry: undefined }]);
  // A real Redis error (a SET this connection's ACL user may not run) is a coded store error.
  const user = `herdcache-test-${prefix.split(':')[2]}`;
  await client.call('ACL', 'SETUSER', user, 'on', 'nopass', '~*', '&*', '+@all', '-set');
  const limited = await connect(undefined, { username: user, password: 'any' });
  try {
    const denied = redisStore({ client: limited, prefix, breaker: false, ...patient });
    const error = await denied.setMany([{ key: 'k', entry: entry(1), ttl: 1000 }]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HerdcacheError);
    expect(error).toMatchObject({ code: 'E_STORE_ERROR' });
    expect((error as Error & { cause: Error }).cause.message).toMatch(/NOPERM/);
  } finally {
    limited.disconnect();
    await client.call('ACL', 'DELUSER', user);
  }
});

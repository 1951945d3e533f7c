/**
 * The store's pure parts, without a server: the JSON codec, the circuit breaker on a manual
 * clock, key tagging and the Cluster slot function (checked against ioredis's own).
 */
import { manualClock } from '../../src/core/freshness';
import { CircuitBreaker } from '../../src/redis/breaker';
import { jsonCodec } from '../../src/redis/codec';
import { escapeGlob, hashSlot, taggedKey } from '../../src/redis/keys';

// ioredis's slot function (untyped). Fed the UTF-8 bytes the client puts on the wire, since its
// own string encoder differs from Buffer.from on lone surrogates.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const calculateSlot = require('cluster-key-slot') as (key: string | Buffer) => number;

describe('jsonCodec', () => {
  it('round-trips values and finite or infinite freshness', () => {
    const cases = [
      { value: { a: [1, 'two', null, { b: true }] }, freshUntil: 1_700_000_000_123.5, staleUntil: 1_700_000_005_000 },
      { value: 'text with "quotes" and ünïcödé', freshUntil: Infinity, staleUntil: Infinity },
      { value: 0, freshUntil: 10, staleUntil: Infinity },
      { value: null, freshUntil: 10, staleUntil: 10 },
      { value: false, freshUntil: 10, staleUntil: 20 },
      { value: 'timed', freshUntil: 10, staleUntil: 20, fillMs: 12.5 },
      { value: 'instant', freshUntil: Infinity, staleUntil: Infinity, fillMs: 0 },
    ];
    for (const entry of cases) expect(jsonCodec.decode(jsonCodec.encode(entry))).toEqual(entry);
  });

  it('decodes Buffers as UTF-8 text', () => {
    const entry = { value: 'ü', freshUntil: 1, staleUntil: 2 };
    expect(jsonCodec.decode(Buffer.from(jsonCodec.encode(entry) as string))).toEqual(entry);
  });

  it.each([
    ['a BigInt', 1n],
    ['a function', () => 1],
    ['a symbol', Symbol('s')],
    ['undefined', undefined],
  ])('refuses %s with E_STORE_ENCODE', (_label, value) => {
    expect(() => jsonCodec.encode({ value, freshUntil: 1, staleUntil: 1 })).toThrow(
      expect.objectContaining({ code: 'E_STORE_ENCODE' }),
    );
  });

  it('refuses cycles with E_STORE_ENCODE, keeping the cause', () => {
    const cycle: { self?: unknown } = {};
    cycle.self = cycle;
    expect(() => jsonCodec.encode({ value: cycle, freshUntil: 1, staleUntil: 1 })).toThrow(
      expect.objectContaining({ code: 'E_STORE_ENCODE', cause: expect.any(TypeError) }),
    );
  });

  it.each([
    ['garbage', 'garbage'],
    ['empty', ''],
    ['a number', '42'],
    ['null', 'null'],
    ['foreign JSON', '{"value":1}'],
    ['version 0', '{"v":0,"f":1,"s":1,"d":1}'],
    ['version "1"', '{"v":"1","f":1,"s":1,"d":1}'],
    ['stale before fresh', '{"v":1,"f":2,"s":1,"d":1}'],
    ['no value', '{"v":1,"f":1,"s":1}'],
    ['a string time', '{"v":1,"f":"1","s":1,"d":1}'],
    ['a string fill time', '{"v":1,"f":1,"s":1,"m":"5","d":1}'],
  ])('refuses %s with E_STORE_DECODE', (_label, raw) => {
    expect(() => jsonCodec.decode(raw)).toThrow(expect.objectContaining({ code: 'E_STORE_DECODE' }));
  });

  it.each([
    ['a trailing field after the value', '{"v":1,"f":1,"s":2,"d":1,"x":2}'],
    ['two values', '{"v":1,"f":1,"s":2,"d":1,"d":2}'],
    ['an unclosed value', '{"v":1,"f":1,"s":2,"d":{"a":1}'],
    ['a tag list after the value', '{"v":1,"f":1,"s":2,"d":1,"t":["T"],"g":[0]}'],
    ['numbers JSON would spell otherwise', '{"v":1,"f":1e3,"s":2.5E3,"m":0.25,"d":[1]}'],
    ['null times', '{"v":1,"f":null,"s":null,"d":"x"}'],
    ['fields in another order', '{"f":1,"v":1,"d":"x","s":2}'],
    ['garbage after the header', '{"v":1,"f":1,"s":2,"d":nope}'],
    ['times as encode writes them', '{"v":1,"f":1796239778463,"s":1796239878463,"d":{"id":"a"}}'],
    // The same header again (read from the last payload's): the value still decides.
    ['the same header, another value', '{"v":1,"f":1796239778463,"s":1796239878463,"d":[2]}'],
    ['the same header, a trailing field', '{"v":1,"f":1796239778463,"s":1796239878463,"d":1,"x":2}'],
    ['the same header, no value', '{"v":1,"f":1796239778463,"s":1796239878463,"d":}'],
    ['a header that only starts alike', '{"v":1,"f":1796239778463,"s":17962398784630,"d":1}'],
    ['16-digit times', '{"v":1,"f":9007199254740993,"s":9007199254740995,"d":1}'],
    ['a leading zero', '{"v":1,"f":01,"s":2,"d":1}'],
    ['zero times', '{"v":1,"f":0,"s":0,"d":1}'],
    ['negative times', '{"v":1,"f":-5,"s":-1,"d":1}'],
    ['a stale time before a long fresh one', '{"v":1,"f":1796239778463,"s":179623977846,"d":1}'],
  ])('reads %s exactly as a plain JSON.parse of the envelope would (the untagged fast path)', (_label, raw) => {
    // The reference: parse the whole envelope and keep the fields the codec keeps.
    let expected: unknown;
    try {
      const o = JSON.parse(raw) as {
        v: unknown;
        f: number | null;
        s: number | null;
        m?: number;
        d?: unknown;
        t?: string[];
        g?: number[];
      };
      const ok =
        o.v === 1 &&
        o.d !== undefined &&
        (o.s ?? Infinity) >= (o.f ?? Infinity) &&
        (o.t === undefined) === (o.g === undefined);
      expected = ok
        ? {
            value: o.d,
            freshUntil: o.f ?? Infinity,
            staleUntil: o.s ?? Infinity,
            ...(o.m === undefined ? {} : { fillMs: o.m }),
            ...(o.t === undefined ? {} : { tags: o.t, tagVersions: o.g }),
          }
        : 'refused';
    } catch {
      expected = 'refused';
    }
    let actual: unknown;
    try {
      actual = jsonCodec.decode(raw);
    } catch (error) {
      expect(error).toMatchObject({ code: 'E_STORE_DECODE' });
      actual = 'refused';
    }
    expect(actual).toEqual(expected);
  });

  it('names the version it met and the one it reads', () => {
    expect(() => jsonCodec.decode('{"v":7,"f":1,"s":1,"d":1}')).toThrow(/version 7 .*reads 1/);
  });
});

describe('CircuitBreaker', () => {
  it('opens after threshold consecutive failures, fails fast for the cool-down, then lets one trial through', () => {
    const clock = manualClock();
    const breaker = new CircuitBreaker(3, 1000, 1000, clock.now);
    breaker.failure();
    breaker.failure();
    breaker.success(); // not consecutive: the count starts again
    breaker.failure();
    breaker.failure();
    expect(breaker.admit()).toBe(true);
    breaker.failure();
    expect(breaker.state).toBe('open');
    expect(breaker.admit()).toBe(false);
    clock.advance(999);
    expect(breaker.admit()).toBe(false);
    clock.advance(1);
    expect(breaker.state).toBe('half-open');
    expect(breaker.admit()).toBe(true); // the trial
    expect(breaker.admit()).toBe(false); // only one
    breaker.success();
    expect(breaker.state).toBe('closed');
    expect(breaker.admit()).toBe(true);
    expect(breaker.admit()).toBe(true);
  });

  it('a failed trial opens it for twice the cool-down, up to the cap; a success starts again from the first', () => {
    const clock = manualClock();
    const breaker = new CircuitBreaker(1, 250, 1000, clock.now);
    breaker.failure();
    const opened: number[] = [];
    for (let i = 0; i < 5; i++) {
      // Open for exactly the current cool-down, then one trial, which fails.
      let waited = 0;
      while (!breaker.admit()) {
        clock.advance(1);
        waited++;
      }
      opened.push(waited);
      clock.advance(10);
      breaker.failure();
    }
    expect(opened).toEqual([250, 500, 1000, 1000, 1000]);
    // A straggler failing while open re-arms the cool-down without growing it.
    breaker.failure();
    expect(breaker.coolDown).toBe(1000);
    clock.advance(1000);
    expect(breaker.admit()).toBe(true);
    breaker.success();
    expect(breaker.state).toBe('closed');
    breaker.failure();
    clock.advance(249);
    expect(breaker.admit()).toBe(false);
    clock.advance(1);
    expect(breaker.admit()).toBe(true);
  });

  it('answered(): a late reply ends the cool-down at once; the next call is the one trial, and only its success closes', () => {
    const clock = manualClock();
    const breaker = new CircuitBreaker(2, 5000, 5000, clock.now);
    breaker.answered(); // closed: nothing to end
    expect(breaker.state).toBe('closed');
    breaker.failure();
    breaker.failure();
    expect(breaker.admit()).toBe(false);
    breaker.answered();
    expect(breaker.state).toBe('half-open');
    expect(breaker.admit()).toBe(true); // the trial
    expect(breaker.admit()).toBe(false); // only one
    breaker.success();
    expect(breaker.state).toBe('closed');
  });
});

describe('keys', () => {
  it('leaves ordinary keys alone', () => {
    expect(taggedKey('user:1', 256)).toBe('user:1');
    expect(taggedKey('a}b', 256)).toBe('a}b');
    expect(taggedKey('x'.repeat(256), 256)).toBe('x'.repeat(256));
  });

  it('hashes long keys to exactly maxKeyLength chars with a readable head', () => {
    const long = `user:${'x'.repeat(300)}`;
    const tagged = taggedKey(long, 100);
    expect(tagged).toHaveLength(100);
    expect(tagged).toMatch(/^user:x{30}#[0-9a-f]{64}$/);
    expect(taggedKey(`${long}y`, 100)).not.toBe(tagged);
  });

  it('hashes empty keys and keys starting with "}" (an empty hash tag would split value and lock)', () => {
    expect(taggedKey('', 256)).toMatch(/^#[0-9a-f]{64}$/);
    expect(taggedKey('}x', 256)).toMatch(/^#[0-9a-f]{64}$/);
    expect(taggedKey('}x', 256)).not.toBe(taggedKey('}y', 256));
  });

  it('computes the same slots as cluster-key-slot (ioredis), UTF-8 and hash tags included', () => {
    const samples = [
      '',
      'a',
      'foo',
      '{user1000}.following',
      'foo{{bar}}zap',
      'foo{bar}{zap}',
      '{}x',
      'ü',
      '€uro',
      '😀',
      'a\ud800b',
      '\udc00',
      'herdcache:{k}',
      'herdcache:{k}:lock',
    ];
    for (let i = 0; i < 2000; i++) samples.push(`p:{key:${i}}`, String.fromCharCode(i * 37) + i);
    for (const key of samples) expect([key, hashSlot(key)]).toEqual([key, calculateSlot(Buffer.from(key, 'utf8'))]);
  });

  it('follows Redis, not cluster-key-slot, on an empty tag followed by another one', () => {
    // Redis hashes the whole key when the first {...} is empty (cluster.test.ts checks this
    // against CLUSTER KEYSLOT); cluster-key-slot 1.1 hashes "{bar" instead.
    expect(hashSlot('foo{}{bar}')).toBe(hashSlot('foo{}{bar}x'.slice(0, 10)));
    expect(hashSlot('foo{}{bar}')).not.toBe(hashSlot('bar'));
  });

  it('gives a value key and its lock key the same slot', () => {
    for (const key of ['a', 'a}b', '{a}', 'ü€😀', taggedKey('', 256), taggedKey('}', 256)]) {
      expect(hashSlot(`p:{${key}}:lock`)).toBe(hashSlot(`p:{${key}}`));
    }
  });

  it('escapes glob metacharacters', () => {
    expect(escapeGlob('a*b?c[d]e\\f')).toBe('a\\*b\\?c\\[d\\]e\\\\f');
  });
});

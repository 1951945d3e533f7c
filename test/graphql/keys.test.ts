/** Keys that cannot collide: canonical arguments and the key layout. */
import { cachedFieldKey, canonicalArgs, fieldKey, identityString } from '../../src/graphql/keys';

/** Same entries, keys inserted in reverse order, at every depth. */
function reversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversed);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).reverse()) out[key] = reversed((value as Record<string, unknown>)[key]);
  return out;
}

/** A small deterministic PRNG so a failing case can be replayed from its seed. */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function randomValue(rand: () => number, depth: number): unknown {
  const r = rand();
  if (depth > 2 || r < 0.35) {
    const p = rand();
    if (p < 0.3) return Math.floor(rand() * 5);
    if (p < 0.6) return ['a', 'b', '1', '', 'a"b', 'x:y'][Math.floor(rand() * 6)];
    if (p < 0.8) return rand() < 0.5;
    return null;
  }
  if (r < 0.55) return Array.from({ length: Math.floor(rand() * 3) }, () => randomValue(rand, depth + 1));
  const out: Record<string, unknown> = {};
  for (const key of ['b', 'a', 'c', 'd'].slice(0, 1 + Math.floor(rand() * 4))) out[key] = randomValue(rand, depth + 1);
  return out;
}

describe('canonicalArgs', () => {
  it('ignores key order at every depth', () => {
    const a = { first: 10, filter: { b: 1, a: { d: [{ y: 1, x: 2 }], c: 3 } } };
    const b = { filter: { a: { c: 3, d: [{ x: 2, y: 1 }] }, b: 1 }, first: 10 };
    expect(canonicalArgs(a)).toBe(canonicalArgs(b));
    expect(canonicalArgs(a)).toBe('{"filter":{"a":{"c":3,"d":[{"x":2,"y":1}]},"b":1},"first":10}');
  });

  it('randomized: equal values encode equally, different values differently', () => {
    const rand = prng(42);
    const seen = new Map<string, string>();
    for (let i = 0; i < 2000; i++) {
      const value = randomValue(rand, 0);
      const json = JSON.stringify(value);
      const key = canonicalArgs(value)!;
      expect(key).toBe(canonicalArgs(reversed(value)));
      // Injective: the canonical form decodes back to the value (keys sorted).
      expect(JSON.stringify(JSON.parse(key))).toBe(JSON.stringify(JSON.parse(canonicalArgs(JSON.parse(json))!)));
      const previous = seen.get(key);
      if (previous !== undefined) expect(JSON.parse(previous)).toEqual(JSON.parse(json));
      seen.set(key, json);
    }
    expect(seen.size).toBeGreaterThan(100);
  });

  it('encodes a record of scalars (its direct path) exactly as the general path does', () => {
    // A record inside a list takes the general writer: its encoding must be the same characters.
    const general = (value: unknown) => canonicalArgs([value])?.slice(1, -1);
    const long = 'x'.repeat(1020);
    const cases: unknown[] = [
      { n: 1 },
      { b: 'x', a: -0, c: 1.5e300, d: true, e: false, f: null, h: '\u2028"\\' },
      Object.assign(Object.create(null), { z: 'é', y: 0 }),
      { [long]: 1 },
      { a: long },
      { a: long.slice(0, 1015) },
      { a: 'x'.repeat(1015), b: 'y' },
      Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, i])),
      Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i])),
    ];
    const rand = prng(7);
    for (let i = 0; i < 500; i++) {
      const record: Record<string, unknown> = {};
      for (const key of ['b', 'a', 'c', 'é', '"']) if (rand() < 0.6) record[key] = randomValue(rand, 3);
      cases.push(record);
    }
    for (const value of cases) {
      const key = canonicalArgs(value);
      if (key?.startsWith('#')) expect(key).toMatch(/^#[0-9a-f]{64}$/);
      else if (key !== undefined && key.length > 1022)
        expect(key).toBe(JSON.stringify(value)); // its list would be hashed
      else expect(key).toBe(general(value));
    }
    // An argument set to undefined is an absent one (graphql-js never sets one); deeper, inside a
    // custom scalar's value (a JSON scalar's `{ a: $unset }`), a resolver can tell `{ a: undefined }`
    // from `{}`: not keyed at all.
    expect(canonicalArgs({ b: 'x', g: undefined })).toBe(canonicalArgs({ b: 'x' }));
    expect(canonicalArgs({ v: { a: undefined } })).toBeUndefined();
    expect(canonicalArgs({ v: [{ a: undefined }] })).toBeUndefined();
    expect(canonicalArgs({ v: {} })).toBe('{"v":{}}');
    // Past ARGS_INLINE_MAX the encoding is hashed, whichever path: 1024 characters stay inline.
    expect(canonicalArgs({ a: 'x'.repeat(1016) })).toBe(`{"a":"${'x'.repeat(1016)}"}`);
    expect(canonicalArgs({ a: 'x'.repeat(1017) })).toMatch(/^#[0-9a-f]{64}$/);
  });

  it('keeps list order, and tells apart values JSON would merge', () => {
    expect(canonicalArgs({ ids: [1, 2] })).not.toBe(canonicalArgs({ ids: [2, 1] }));
    const distinct = [
      { v: 1 },
      { v: '1' },
      { v: 1n },
      { v: true },
      { v: 'true' },
      { v: null },
      { v: 'null' },
      { v: [] },
      { v: {} },
      {},
    ];
    expect(new Set(distinct.map(canonicalArgs)).size).toBe(distinct.length);
  });

  it('treats an undefined property as absent (graphql-js omits absent arguments)', () => {
    expect(canonicalArgs({ a: 1, b: undefined })).toBe(canonicalArgs({ a: 1 }));
  });

  it('uses toJSON for custom scalar values (Date)', () => {
    expect(canonicalArgs({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
    expect(canonicalArgs(Object.assign(Object.create(null), { b: 1, a: 2 }))).toBe('{"a":2,"b":1}');
  });

  it('refuses a custom scalar value whose toJSON says nothing: an invalid Date is not the key of null', () => {
    // A lenient DateTime scalar (parseValue: v => new Date(v)) given "garbage": before, its key was
    // {"since":null}, and the answer to it was served for since: null.
    expect(canonicalArgs({ since: new Date('garbage') })).toBeUndefined();
    expect(canonicalArgs({ since: { toJSON: () => undefined } })).toBeUndefined();
    expect(canonicalArgs({ since: null })).toBe('{"since":null}');
  });

  it('refuses what it cannot encode faithfully', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    class Opaque {
      constructor(readonly x: number) {}
    }
    for (const bad of [
      { m: new Map([[1, 2]]) },
      { s: new Set([1]) },
      { o: new Opaque(1) },
      { f: () => 1 },
      { n: NaN },
      { n: Infinity },
      { l: [undefined] },
      { s: Symbol('x') },
      cyclic,
    ]) {
      expect(canonicalArgs(bad)).toBeUndefined();
    }
    // A shared (non-cyclic) reference is fine.
    const shared = { x: 1 };
    expect(canonicalArgs({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });
});

describe('fieldKey', () => {
  it('separates identity, arguments and session unambiguously', () => {
    const keys = [
      fieldKey('gql:', 'User.posts', '1', '{}'),
      fieldKey('gql:', 'User.posts', '1', '{}', 'alice'),
      fieldKey('gql:', 'User.posts', '1', '{}', 'bob'),
      fieldKey('gql:', 'User.posts', '1",{}', '{}'),
      fieldKey('gql:', 'User.posts', '1:{}', '{}'),
      fieldKey('gql:', 'User.posts', undefined, '{}'),
      fieldKey('gql:', 'User.posts', 'null', '{}'),
      fieldKey('gql:', 'User.post', '1', '{}'),
      fieldKey('gql:', 'Post.posts', '1', '{}'),
      fieldKey('gql:', 'User.posts', '1', '{"first":1}'),
      fieldKey('gql:', 'User.posts', '1', '{}', '1'),
      fieldKey('gql:', 'User.posts', '1', '{}', ''),
    ];
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys[0]).toBe('\0field\0gql:User.posts:["1",{}]');
    expect(keys[1]).toBe('\0field\0gql:User.posts:["1",{},"alice"]');
    expect(keys[5]).toBe('\0field\0gql:User.posts:[null,{}]');
  });
});

describe('identityString', () => {
  it('accepts non-empty strings and finite numbers; 1 and "1" are the same entity', () => {
    expect(identityString('a')).toBe('a');
    expect(identityString(1)).toBe('1');
    expect(identityString('1')).toBe('1');
    expect(identityString(12n)).toBe('12');
    for (const none of ['', NaN, undefined, null, {}, [], true]) expect(identityString(none)).toBeUndefined();
  });
});

describe('cachedFieldKey', () => {
  it('builds the keys the directive uses', () => {
    expect(cachedFieldKey('Query.user', { args: { id: '1' } })).toBe('\0field\0gql:Query.user:[null,{"id":"1"}]');
    expect(cachedFieldKey('User.posts', { identity: 7, args: { first: 2 } })).toBe(
      '\0field\0gql:User.posts:["7",{"first":2}]',
    );
    expect(cachedFieldKey('Query.me', { session: 'u1', keyPrefix: 'v2:' })).toBe('\0field\0v2:Query.me:[null,{},"u1"]');
  });

  it('refuses what would not name a key', () => {
    expect(() => cachedFieldKey('user')).toThrow(/argument "coordinate"/);
    expect(() => cachedFieldKey('Query.user', { args: { m: new Map() } })).toThrow(/option "args"/);
    expect(() => cachedFieldKey('User.posts', { identity: '' })).toThrow(/option "identity"/);
    // A misspelt args gave the key of the call without arguments: an invalidation that misses.
    expect(() => cachedFieldKey('Query.a', { argz: { id: '1' } } as object)).toThrow(
      expect.objectContaining({
        code: 'E_INVALID_OPTION',
        message: expect.stringMatching(/cachedFieldKey\(\): unknown option "argz"\.\nDid you mean "args"\?/),
      }),
    );
    expect(() => cachedFieldKey('Query.a', null as never)).toThrow(
      expect.objectContaining({ code: 'E_INVALID_ARGUMENT', message: expect.stringMatching(/argument "options"/) }),
    );
  });
});

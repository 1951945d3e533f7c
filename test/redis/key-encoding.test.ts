/**
 * Key encoding is injective: no two distinct cache keys map to one Redis key, whatever is in them
 * (lone surrogates, '#', '}', keys shaped like another key's hashed form, long keys).
 * Checked on the bytes Redis receives (ioredis sends strings as UTF-8), over generated keys, and
 * end to end on a real Redis for the known collisions.
 */
import type Redis from 'ioredis';
import { taggedKey } from '../../src/redis/keys';
import { redisStore } from '../../src/redis/redis-store';
import { connect, entry, randomPrefix } from './helpers';

const MAX = 80; // a small maxKeyLength, so long keys are cheap to generate

/** The Redis key (as bytes, as ioredis sends it) of a cache key. */
function redisKeyBytes(key: string): string {
  return Buffer.from(`p:{${taggedKey(key, MAX)}}`, 'utf8').toString('hex');
}

/** A small deterministic PRNG: a failure reproduces. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const ALPHABET = [
  'a',
  'b',
  '0',
  'f',
  '#',
  '}',
  '{',
  ':',
  'é',
  '😀',
  '\uD800',
  '\uDBFF',
  '\uDC00',
  '\uDFFF',
  '\uFFFD',
  '\u0000',
];

function generatedKeys(count: number): string[] {
  const next = random(9);
  const keys = new Set<string>();
  while (keys.size < count) {
    const length = [1, 2, 3, 8, MAX - 1, MAX, MAX + 1, 2 * MAX][Math.floor(next() * 8)]!;
    let key = '';
    while (key.length < length) key += ALPHABET[Math.floor(next() * ALPHABET.length)];
    keys.add(key);
    // The adversary's keys: one that spells another key's hashed form, and one that differs from
    // a key only by which lone surrogate it holds.
    if (next() < 0.3) keys.add(taggedKey(key, MAX));
    if (next() < 0.3) keys.add(key.replace(/[\uD800-\uDFFF]/g, (c) => (c === '\uD800' ? '\uDBFF' : '\uD800')));
  }
  return [...keys];
}

it('maps 5,000 generated distinct keys (surrogates, "#", "}", hashed look-alikes, long) to 5,000 Redis keys', () => {
  const keys = generatedKeys(5_000);
  const owner = new Map<string, string>();
  const collisions: [string, string][] = [];
  for (const key of keys) {
    const bytes = redisKeyBytes(key);
    const other = owner.get(bytes);
    if (other !== undefined && other !== key) collisions.push([other, key]);
    owner.set(bytes, key);
  }
  expect(collisions.slice(0, 3)).toEqual([]);
  expect(owner.size).toBe(new Set(keys).size);
});

it("the known collisions: lone surrogates, and a key spelling a long key's hashed form", () => {
  expect(redisKeyBytes('\uD800')).not.toBe(redisKeyBytes('\uDBFF'));
  expect(redisKeyBytes('\uD800')).not.toBe(redisKeyBytes('\uFFFD'));
  const long = 'x'.repeat(3 * MAX);
  const lookAlike = taggedKey(long, MAX);
  expect(lookAlike).toHaveLength(MAX);
  expect(redisKeyBytes(lookAlike)).not.toBe(redisKeyBytes(long));
  // Long keys differing only by a lone surrogate hash apart too.
  expect(redisKeyBytes(`${long}\uD800`)).not.toBe(redisKeyBytes(`${long}\uDBFF`));
  // Keys that need no escaping keep their readable name (and hashed well-formed keys their old one).
  expect(taggedKey('User:42#1', MAX)).toBe('User:42#1');
  expect(taggedKey('😀', MAX)).toBe('😀');
});

describe('on Redis', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connect();
  });
  afterAll(async () => {
    await client.quit();
  });

  it('distinct keys keep distinct values', async () => {
    const store = redisStore({ client, prefix: randomPrefix('keys'), maxKeyLength: MAX });
    const long = 'y'.repeat(2 * MAX);
    const keys = ['\uD800', '\uDBFF', '\uFFFD', long, taggedKey(long, MAX), `${long}\uD800`, `${long}\uDBFF`];
    await store.setMany(keys.map((key, i) => ({ key, entry: entry(i), ttl: 60_000 })));
    const read = await store.getMany(keys);
    expect(read.map((found) => found?.value)).toEqual(keys.map((_, i) => i));
  });
});

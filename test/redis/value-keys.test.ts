/**
 * RedisLink remembers the value key (`prefix{K}`) of each cache key it names, so a warm read of the
 * same keys builds no string per key. The memo is a pure cache: the key it returns is the one it
 * would build, for every kind of key (raw, hashed, too long to be remembered), and it stays bounded
 * however many distinct keys pass.
 */
import type { Cluster, Redis } from 'ioredis';
import type { CallGuard } from '../../src/redis/guard';
import { jsonCodec } from '../../src/redis/codec';
import { taggedKey } from '../../src/redis/keys';
import { RedisLink } from '../../src/redis/link';

const MAX_KEY_LENGTH = 512;

function link(): RedisLink {
  const client = { isCluster: false, options: {} } as unknown as Redis | Cluster;
  return new RedisLink(client, undefined as unknown as CallGuard, 'p:', jsonCodec, MAX_KEY_LENGTH, 1000, 1 << 20);
}

const built = (key: string) => `p:{${taggedKey(key, MAX_KEY_LENGTH)}}`;

it('answers the key it would build, the first time and every later time, for every kind of key', () => {
  const l = link();
  const keys = [
    'item:1',
    '}starts-with-brace',
    'lone\uD800surrogate',
    `ends-like-hashed#${'a'.repeat(64)}`,
    'x'.repeat(256), // the longest remembered
    'y'.repeat(300), // not remembered
    'z'.repeat(MAX_KEY_LENGTH + 1), // hashed, not remembered
  ];
  for (let round = 0; round < 3; round++) {
    for (const key of keys) expect(l.valueKey(key)).toBe(built(key));
    expect(l.valueKeys(keys)).toEqual(keys.map(built));
  }
  expect(l._valueKeysHeld).toBe(5);
});

it('stays bounded: at most 2 × 10,000 keys remembered however many distinct keys pass', () => {
  const l = link();
  for (let i = 0; i < 25_000; i++) {
    const key = `k${i}`;
    expect(l.valueKey(key)).toBe(built(key));
    expect(l._valueKeysHeld).toBeLessThanOrEqual(20_000);
  }
  expect(l._valueKeysHeld).toBeGreaterThan(10_000);
});

it('a working set a little over the bound stays remembered (emptying the memo when full would keep 2,000 of 12,000)', () => {
  const l = link();
  const keys = Array.from({ length: 12_000 }, (_, i) => `w${i}`);
  for (let round = 0; round < 3; round++) {
    for (const key of keys) expect(l.valueKey(key)).toBe(built(key));
    expect(keys.filter((key) => !l._remembers(key))).toEqual([]);
  }
  expect(l._valueKeysHeld).toBeLessThanOrEqual(20_000);
});

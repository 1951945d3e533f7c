/**
 * The fill lock against a real redis-server: SET NX per key, the re-read after trying the lock,
 * the fenced write (lock expired, lock removed by an invalidation), compare-and-delete release.
 */
import type Redis from 'ioredis';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { connect, entry, randomPrefix, recordingReporter, sleep, type RecordingReporter } from './helpers';

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

beforeEach(() => {
  prefix = randomPrefix('lock');
  // These tests are about what the store does, not how fast: a loaded machine (a shared CI runner)
  // can hold a reply past the default 250 ms. Timeouts have their own tests (faults.test.ts).
  store = redisStore({ client, prefix, commandTimeout: 10_000 });
  reporter = recordingReporter();
  store.bind(reporter);
});

const valueKey = (key: string): string => `${prefix}{${key}}`;
const lockKey = (key: string): string => `${prefix}{${key}}:lock`;

describe('fill lock', () => {
  it('SET NX: the first token wins, a second token loses until the lock is released', async () => {
    const [first] = await store.lock.acquire(['k'], 'token-a', 10_000);
    const [second] = await store.lock.acquire(['k'], 'token-b', 10_000);
    expect(first).toEqual({ won: true, entry: undefined });
    // A loser learns whose lock it met: its waiter tells that lock's announcement from a late one.
    expect(second).toEqual({ won: false, entry: undefined, holder: 'token-a' });
    expect(await client.get(lockKey('k'))).toBe('token-a');
    const pttl = await client.pttl(lockKey('k'));
    expect(pttl).toBeGreaterThan(9_000);
    await store.lock.release(['k'], 'token-a');
    const [third] = await store.lock.acquire(['k'], 'token-b', 10_000);
    expect(third!.won).toBe(true);
  });

  it('is re-entrant for the same token (a retried acquire wins its own lock)', async () => {
    await store.lock.acquire(['k'], 'token-a', 1_000);
    const [again] = await store.lock.acquire(['k'], 'token-a', 20_000);
    expect(again!.won).toBe(true);
    expect(await client.pttl(lockKey('k'))).toBeGreaterThan(10_000);
  });

  it('a foreign key of another type under the prefix reads as missing: the scripts never abort halfway', async () => {
    await client.hset(valueKey('a'), 'field', 'x'); // a hash where a value would be
    await client.hset(lockKey('b'), 'field', 'x'); // a hash where a lock would be: no expiry, nobody's lock, taken over
    const attempts = await store.lock.acquire(['a', 'b', 'c'], 'token', 10_000);
    expect(attempts).toEqual([
      { won: true, entry: undefined },
      { won: true, entry: undefined },
      { won: true, entry: undefined },
    ]);
    // The keys after the foreign ones were processed too, and the write and release go through.
    expect(await store.lock.writeAndRelease([{ key: 'c', entry: entry('v'), ttl: 60_000 }], 'token')).toEqual([true]);
    await store.lock.release(['a', 'b'], 'token');
    expect(await client.exists(lockKey('a'), lockKey('b'))).toBe(0);
  });

  it('returns the value read after trying the lock (the re-check), winner or not', async () => {
    const written = entry('already there');
    await store.setMany([{ key: 'k', entry: written, ttl: 60_000 }]);
    const [won] = await store.lock.acquire(['k'], 'a', 1000);
    const [lost] = await store.lock.acquire(['k'], 'b', 1000);
    expect(won).toEqual({ won: true, entry: written });
    expect(lost).toEqual({ won: false, entry: written, holder: 'a' });
  });

  it('re-reads garbage as a miss, without reporting it again (the load getMany did)', async () => {
    await client.set(valueKey('k'), '\u0000garbage');
    const [attempt] = await store.lock.acquire(['k'], 'a', 1000);
    expect(attempt).toEqual({ won: true, entry: undefined });
    expect(reporter.decodeErrors).toEqual([]);
  });

  it('tries 100 locks at once, per key, aligned with the keys', async () => {
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
    await store.lock.acquire(
      keys.filter((_, i) => i % 2 === 0),
      'other',
      10_000,
    );
    await store.setMany([{ key: 'k7', entry: entry(7), ttl: 60_000 }]);
    const attempts = await store.lock.acquire(keys, 'mine', 10_000);
    expect(attempts.map((a) => a.won)).toEqual(keys.map((_, i) => i % 2 === 1));
    expect(attempts.map((a) => a.entry?.value)).toEqual(keys.map((_, i) => (i === 7 ? 7 : undefined)));
  });

  it('writes and releases while the token holds the lock', async () => {
    await store.lock.acquire(['a', 'b'], 'tok', 10_000);
    const landed = await store.lock.writeAndRelease(
      [
        { key: 'a', entry: entry('A'), ttl: 30_000 },
        { key: 'b', entry: entry('B', Infinity, Infinity), ttl: Infinity },
      ],
      'tok',
    );
    expect(landed).toEqual([true, true]);
    expect((await store.getMany(['a', 'b'])).map((e) => e?.value)).toEqual(['A', 'B']);
    expect(await client.exists(lockKey('a'), lockKey('b'))).toBe(0);
    expect(await client.pttl(valueKey('a'))).toBeGreaterThan(29_000);
    expect(await client.pttl(valueKey('b'))).toBe(-1);
  });

  it('fence: writes nothing once the lock expired, and leaves a newer value alone', async () => {
    await store.lock.acquire(['k'], 'slow', 50);
    await sleep(80);
    // Another filler took the lock after the expiry and wrote its value.
    await store.lock.acquire(['k'], 'fast', 10_000);
    expect(await store.lock.writeAndRelease([{ key: 'k', entry: entry('new'), ttl: 60_000 }], 'fast')).toEqual([true]);
    expect(await store.lock.writeAndRelease([{ key: 'k', entry: entry('old'), ttl: 60_000 }], 'slow')).toEqual([false]);
    expect((await store.getMany(['k']))[0]?.value).toBe('new');
  });

  it('fence: an expired lock nobody retook still refuses the write', async () => {
    await store.lock.acquire(['k'], 'slow', 50);
    await sleep(80);
    expect(await store.lock.writeAndRelease([{ key: 'k', entry: entry('late'), ttl: 60_000 }], 'slow')).toEqual([
      false,
    ]);
    expect(await client.exists(valueKey('k'))).toBe(0);
  });

  it('fence: delete() during a fill removes the lock, so the fill writes nothing', async () => {
    await store.setMany([{ key: 'k', entry: entry('v1'), ttl: 60_000 }]);
    await store.lock.acquire(['k', 'other'], 'filler', 10_000);
    await store.delete(['k']);
    expect(await client.exists(valueKey('k'), lockKey('k'))).toBe(0);
    const landed = await store.lock.writeAndRelease(
      [
        { key: 'k', entry: entry('computed before the invalidation'), ttl: 60_000 },
        { key: 'other', entry: entry('fine'), ttl: 60_000 },
      ],
      'filler',
    );
    expect(landed).toEqual([false, true]);
    expect((await store.getMany(['k', 'other'])).map((e) => e?.value)).toEqual([undefined, 'fine']);
  });

  it('an unencodable value is reported, not written, and its lock is released', async () => {
    await store.lock.acquire(['big', 'ok'], 'tok', 10_000);
    const landed = await store.lock.writeAndRelease(
      [
        { key: 'big', entry: entry(1n), ttl: 60_000 },
        { key: 'ok', entry: entry('ok'), ttl: 60_000 },
      ],
      'tok',
    );
    expect(landed).toEqual([false, true]);
    expect(reporter.encodeErrors.map((e) => e.key)).toEqual(['big']);
    expect(await client.exists(valueKey('big'), lockKey('big'), lockKey('ok'))).toBe(0);
  });

  it('release deletes only the locks the token holds', async () => {
    await store.lock.acquire(['mine'], 'me', 10_000);
    await store.lock.acquire(['theirs'], 'them', 10_000);
    await store.lock.release(['mine', 'theirs', 'nobody'], 'me');
    expect(await client.exists(lockKey('mine'))).toBe(0);
    expect(await client.get(lockKey('theirs'))).toBe('them');
  });

  it('answers empty batches without a call', async () => {
    await expect(store.lock.acquire([], 't', 1000)).resolves.toEqual([]);
    await expect(store.lock.writeAndRelease([], 't')).resolves.toEqual([]);
    await expect(store.lock.release([], 't')).resolves.toBeUndefined();
    await expect(store.delete([])).resolves.toBeUndefined();
    await expect(store.setMany([])).resolves.toBeUndefined();
  });
});

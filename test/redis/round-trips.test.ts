/**
 * Round trips, counted two ways and never timed: on the server (`INFO commandstats` deltas on a
 * server of this file's own, so parallel test files cannot add to the counts) and on the
 * client's socket (one write per round trip).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { connect, entry, roundTrips } from './helpers';

let server: RedisServer;
let client: Redis;
let admin: Redis;
let store: RedisStore;

const keys = Array.from({ length: 100 }, (_, i) => `key:${i}`);

beforeAll(async () => {
  server = await startRedisServer();
  client = await connect(server.url);
  admin = await connect(server.url);
  store = redisStore({ client, prefix: 'rt:' });
  // Scripts go as EVAL the first time on a connection, EVALSHA after: warm them up.
  await store.lock.acquire(['warm'], 'w', 1000);
  await store.lock.writeAndRelease([{ key: 'warm', entry: entry(1), ttl: 1000 }], 'w');
  await store.lock.acquire(['warm'], 'w', 1000);
  await store.lock.release(['warm'], 'w');
  (await store.lock.readOrAcquire(['warm:2'], [true], 'w', 1000)).watch?.close();
  await store.lock.release(['warm:2'], 'w');
});

afterAll(async () => {
  await client.quit();
  await admin.quit();
  await server.stop();
});

const measure = (work: () => Promise<unknown>) => roundTrips(admin, client, work);

it('reads a 100-key batch with one MGET', async () => {
  await store.setMany(keys.slice(0, 50).map((key) => ({ key, entry: entry(key), ttl: 60_000 })));
  let found: unknown[] = [];
  const { commands, writes } = await measure(async () => {
    found = await store.getMany(keys);
  });
  expect(commands).toEqual({ mget: 1 });
  expect(writes).toBe(1);
  expect(found.filter(Boolean)).toHaveLength(50);
});

it('writes a 100-entry batch in one pipeline (one socket write) of SET … PX', async () => {
  const { commands, writes } = await measure(() =>
    store.setMany(keys.map((key) => ({ key, entry: entry(key), ttl: 60_000 }))),
  );
  expect(commands).toEqual({ set: 100 });
  expect(writes).toBe(1);
});

it('tries 100 fill locks, with their re-reads, in one script call', async () => {
  const { commands, writes } = await measure(() => store.lock.acquire(keys, 'tok', 10_000));
  // Commands run by the script are counted by the server too: 100 SET NX and 100 GET, one EVALSHA.
  expect(commands).toEqual({ evalsha: 1, set: 100, get: 100 });
  expect(writes).toBe(1);
});

it('writes and releases 100 keys in one script call', async () => {
  const { commands, writes } = await measure(() =>
    store.lock.writeAndRelease(
      keys.map((key) => ({ key, entry: entry(key), ttl: 60_000 })),
      'tok',
    ),
  );
  // Per key the lock's GET and one of its waiters marker, inside the script (no round trip): nobody
  // waits on these keys, so no PUBLISH (a waited-on key gets one per waiting process).
  expect(commands).toEqual({ evalsha: 1, get: 200, set: 100, del: 100 });
  expect(writes).toBe(1);
});

it('fenced writes issued in one tick by separate fills (other tokens too) travel in one script call', async () => {
  await store.lock.acquire(['a', 'b', 'c'], 'tok-a', 10_000);
  await store.lock.acquire(['d'], 'tok-d', 10_000);
  let landed: boolean[][] = [];
  const { commands, writes } = await measure(async () => {
    landed = await Promise.all([
      store.lock.writeAndRelease([{ key: 'a', entry: entry('a'), ttl: 60_000 }], 'tok-a'),
      store.lock.writeAndRelease(
        [
          { key: 'b', entry: entry('b'), ttl: 60_000 },
          { key: 'c', entry: entry('c'), ttl: 60_000 },
        ],
        'tok-a',
      ),
      store.lock.writeAndRelease([{ key: 'd', entry: entry('d'), ttl: 60_000 }], 'tok-d'),
      // Not its lock: fenced out, in the same call.
      store.lock.writeAndRelease([{ key: 'e', entry: entry('e'), ttl: 60_000 }], 'tok-a'),
    ]);
  });
  expect(landed).toEqual([[true], [true, true], [true], [false]]);
  expect(commands.evalsha).toBe(1);
  expect(writes).toBe(1);
  expect((await store.getMany(['a', 'b', 'c', 'd', 'e'])).map((found) => found?.value)).toEqual([
    'a',
    'b',
    'c',
    'd',
    undefined,
  ]);
});

it('50 cold siblings through the registry: one read that takes their locks, one write script', async () => {
  const cache = createCache({ store, ttl: 60_000 });
  const siblings = Array.from({ length: 50 }, (_, i) => `sibling:${i}`);
  let values: unknown[] = [];
  // Each sibling is its own getOrCompute (as @cached fields are), its fill finishing on its own.
  const { commands, writes } = await measure(async () => {
    values = await Promise.all(
      siblings.map((key, i) => cache.getOrCompute(key, async () => (await Promise.resolve(), i))),
    );
    // The writes leave right after the answers: let them land before counting.
    await store.getMany(['sibling:0']);
  });
  expect(values).toEqual(siblings.map((_, i) => i));
  expect(commands.evalsha).toBe(2); // lock.readOrAcquire + lock.writeAndRelease
  expect(commands.mget).toBe(1); // the check above
  expect(writes).toBe(3);
  expect(cache.metrics().total).toMatchObject({ fills: 50, lockAcquired: 50 });
});

it('50 cold siblings whose fills finish one by one in one turn (each in its own callback): one lock script, one write script', async () => {
  const cache = createCache({ store, ttl: 60_000 });
  const siblings = Array.from({ length: 50 }, (_, i) => `turn:${i}`);
  let values: unknown[] = [];
  // Each fill is answered from a callback of its own, all run in one phase of the loop (as timers
  // due together, or the replies of one database read burst): the promise jobs are drained between
  // callbacks, so each fill finishes in its own microtask checkpoint. A flush per checkpoint sent
  // 50 write scripts. (Immediates rather than timers: 5 ms timers started across a millisecond
  // boundary are due in two turns, which would make the count depend on the machine.)
  const { commands } = await measure(async () => {
    values = await Promise.all(
      siblings.map((key, i) => cache.getOrCompute(key, () => new Promise((resolve) => setImmediate(() => resolve(i))))),
    );
    await store.getMany(['turn:0']);
  });
  expect(values).toEqual(siblings.map((_, i) => i));
  expect(commands.evalsha).toBe(2); // lock.acquire + one lock.writeAndRelease for the 50
  expect(commands.set).toBe(100); // 50 SET NX (locks) + 50 SET (values)
  expect(cache.metrics().total).toMatchObject({ fills: 50, lockAcquired: 50 });
  expect((await store.getMany(siblings)).map((found) => found?.value)).toEqual(siblings.map((_, i) => i));
});

it('50 unlocked fills (lock: false) finishing one by one in one turn: one write script for the 50', async () => {
  const cache = createCache({ store, ttl: 60_000, lock: false });
  // The write script's first run on this connection is an EVAL: run it once before counting.
  await cache.getOrCompute('unlocked:warm', async () => 'warm');
  const siblings = Array.from({ length: 50 }, (_, i) => `unlocked:${i}`);
  let values: unknown[] = [];
  // As above: each fill answered from a callback of its own, in one phase of the loop. Each
  // getOrCompute's write was a pipeline (and a script run) of its own.
  const { commands } = await measure(async () => {
    values = await Promise.all(
      siblings.map((key, i) => cache.getOrCompute(key, () => new Promise((resolve) => setImmediate(() => resolve(i))))),
    );
    await store.getMany(['unlocked:0']);
  });
  expect(values).toEqual(siblings.map((_, i) => i));
  expect(commands.evalsha).toBe(1); // the write-unless-invalidated script, for the 50
  expect(commands.set).toBe(50);
  expect(cache.metrics().total).toMatchObject({ fills: 51 });
  expect((await store.getMany(siblings)).map((found) => found?.value)).toEqual(siblings.map((_, i) => i));
});

it("unlocked fills' setMany calls of one turn go in one pipeline; a read issued after them in that turn sees them", async () => {
  // As the registry writes an unlocked fill's value: with the time its fill started.
  const since = Date.now() - 1000;
  const writes = Array.from({ length: 20 }, (_, i) => ({ key: `turn-set:${i}`, entry: entry(i), ttl: 60_000, since }));
  let found: unknown[] = [];
  const { commands, writes: socketWrites } = await measure(async () => {
    const written = writes.map((write) => store.setMany([write]));
    // Not awaited: the read is issued in the same turn, after the writes, and must come after them.
    found = (await store.getMany(writes.map((write) => write.key))).map((hit) => hit?.value);
    await Promise.all(written);
  });
  expect(found).toEqual(writes.map((_, i) => i));
  expect(commands).toEqual({ evalsha: 1, get: 20, set: 20, mget: 1 }); // the script checks each key's marker, then writes it
  expect(socketWrites).toBe(2); // one pipeline (one script call for the 20), then the MGET
});

it("an unlocked fill's callers are answered once its gathered write is on the connection", async () => {
  const cache = createCache({ store, ttl: 60_000, lock: false });
  // A command the caller sends on the client itself, past the store (so nothing flushes the
  // gathered write first), as soon as it has its answer: it reaches Redis after the write.
  const raw = await cache
    .getOrCompute('unlocked:order', async () => 'v')
    .then(() => client.exists('rt:{unlocked:order}'));
  expect(raw).toBe(1);
});

it('fenced writes gathered for the turn leave on close(), and their promises settle', async () => {
  // A client of its own: defining the scripts again on `client` would make its next calls EVAL.
  const own = await connect(server.url);
  const other = redisStore({ client: own, prefix: 'rt-close:', subscriber: false });
  await other.lock.acquire(['x'], 'tok-x', 10_000);
  const written = other.lock.writeAndRelease([{ key: 'x', entry: entry('x'), ttl: 60_000 }], 'tok-x');
  await other.close();
  expect(await written).toEqual([true]);
  expect((await other.getMany(['x']))[0]?.value).toBe('x');
  own.disconnect();
});

it('a gathered write whose client is gone settles (rejects), it does not hang', async () => {
  const lost = await connect(server.url, { enableOfflineQueue: false });
  const gone = redisStore({ client: lost, prefix: 'rt-gone:', subscriber: false, breaker: false });
  await gone.lock.acquire(['y'], 'tok-y', 10_000);
  const written = gone.lock.writeAndRelease([{ key: 'y', entry: entry('y'), ttl: 60_000 }], 'tok-y');
  lost.disconnect();
  await expect(written).rejects.toMatchObject({ code: expect.stringMatching(/^E_STORE_/) });
});

it('unlocked writes gathered for the turn leave on close(), or settle (reject) when the client is gone', async () => {
  const own = await connect(server.url);
  const other = redisStore({ client: own, prefix: 'rt-close-unlocked:', subscriber: false });
  const since = Date.now() - 1000;
  const written = other.setMany([{ key: 'x', entry: entry('x'), ttl: 60_000, since }]);
  await other.close();
  await expect(written).resolves.toBeUndefined();
  expect((await other.getMany(['x']))[0]?.value).toBe('x');
  own.disconnect();
  const lost = await connect(server.url, { enableOfflineQueue: false });
  const gone = redisStore({ client: lost, prefix: 'rt-gone-unlocked:', subscriber: false, breaker: false });
  const lostWrite = gone.setMany([{ key: 'y', entry: entry('y'), ttl: 60_000, since }]);
  lost.disconnect();
  await expect(lostWrite).rejects.toMatchObject({ code: expect.stringMatching(/^E_STORE_/) });
});

it("a caller of the turn whose writes are all too large (none sent) is not failed by the others' failed send", async () => {
  const lost = await connect(server.url, { enableOfflineQueue: false });
  const store = redisStore({ client: lost, prefix: 'rt-big:', subscriber: false, breaker: false, maxValueBytes: 1024 });
  const since = Date.now() - 1000;
  lost.disconnect();
  const big = store.setMany([{ key: 'big', entry: entry('x'.repeat(5000)), ttl: 60_000, since }]);
  const small = store.setMany([{ key: 'small', entry: entry('s'), ttl: 60_000, since }]);
  await expect(small).rejects.toMatchObject({ code: expect.stringMatching(/^E_STORE_/) });
  await expect(big).resolves.toBeUndefined(); // nothing of it to send: as when it is sent alone
});

it('releases 100 locks in one script call', async () => {
  await store.lock.acquire(keys, 'tok2', 10_000);
  const { commands, writes } = await measure(() => store.lock.release(keys, 'tok2'));
  // As for the write: the lock's GET and the waiters marker's per key, no PUBLISH (nobody waits).
  expect(commands).toEqual({ evalsha: 1, get: 200, del: 100 });
  expect(writes).toBe(1);
});

it('deletes 100 keys and their locks with one UNLINK', async () => {
  const { commands, writes } = await measure(() => store.delete(keys));
  expect(commands).toEqual({ unlink: 1 });
  expect(writes).toBe(1);
});

it('sends nothing for empty batches', async () => {
  const { commands, writes } = await measure(async () => {
    await store.getMany([]);
    await store.setMany([]);
    await store.lock.acquire([], 't', 1000);
    await store.delete([]);
  });
  expect(commands).toEqual({});
  expect(writes).toBe(0);
});

it("a batch's unlocked writes (fills without the lock, each checking its key's invalidation marker) in one script call", async () => {
  const since = Date.now();
  // Warm the script (EVAL the first time on a connection).
  await store.setMany([{ key: 'warm:3', entry: entry(0), ttl: 60_000, since }]);
  await store.delete([keys[0]!], { at: Date.now() }); // invalidated now: its unlocked write (since before) is refused
  const { commands, writes } = await measure(() =>
    store.setMany(keys.slice(0, 20).map((key) => ({ key, entry: entry(`u:${key}`), ttl: 60_000, since }))),
  );
  // Per key the marker's GET and (unless refused) its SET, inside the one script.
  expect(commands).toEqual({ evalsha: 1, get: 20, set: 19 });
  expect(writes).toBe(1);
  const found = await store.getMany(keys.slice(0, 20));
  expect(found[0]).toBeUndefined();
  expect(found.slice(1).every((e) => e !== undefined)).toBe(true);
});

it('30,000 unlocked writes in one setMany: script calls of 1,000 writes, all written', async () => {
  const since = Date.now();
  const many = Array.from({ length: 30_000 }, (_, i) => `many:${i}`);
  const { commands } = await measure(() =>
    store.setMany(many.map((key) => ({ key, entry: entry(key), ttl: 60_000, since }))),
  );
  expect(commands).toEqual({ evalsha: 30, get: 30_000, set: 30_000 });
  const found = await store.getMany(many);
  expect(found.every((e) => e !== undefined)).toBe(true);
});

/**
 * The lockless gap: a replica filling WITHOUT the fill lock (lock: false, after lockWaitTimeout,
 * or when the lock call failed) must not re-cache a value computed before an invalidate(key) made
 * on another replica. invalidate leaves a short-lived marker with its time; an unlocked write
 * whose fill started before it is dropped. The hit path is unchanged (one MGET).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { connect, randomPrefix, roundTrips, sleep } from './helpers';

// A server of this file's own: the hit-path test counts commands server-wide (INFO commandstats),
// which parallel test files on the shared server would add to.
let server: RedisServer;
let a: Redis;
let b: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  a = await connect(server.url);
  b = await connect(server.url);
});
afterAll(async () => {
  await Promise.all([a.quit(), b.quit()]);
  await server.stop();
});

function replicas(prefix: string) {
  const writer = createCache({ ttl: 60_000, store: redisStore({ client: a, prefix }) });
  const filler = createCache({ ttl: 60_000, lock: false, store: redisStore({ client: b, prefix }) });
  return { writer, filler };
}

it('a fill without the lock that started before invalidate() on another replica does not cache its old value', async () => {
  const { writer, filler } = replicas(randomPrefix('gap'));
  let db = 'old';
  let reading!: () => void;
  const read = new Promise<void>((resolve) => (reading = resolve));
  // The filler reads the database, then takes a while (a slow API) before returning.
  const slow = filler.getOrCompute('k', async () => {
    const seen = db;
    reading();
    await sleep(100);
    return seen;
  });
  await read;
  db = 'new'; // the write to the database…
  await writer.invalidate('k'); // …then its invalidation, on another replica
  expect(await slow).toBe('old'); // its callers get what it computed (it started before the change)
  let fills = 0;
  expect(await writer.getOrCompute('k', () => (fills++, db))).toBe('new');
  expect(fills).toBe(1);
});

it('a fill without the lock that started after the invalidation is cached as usual', async () => {
  const { writer, filler } = replicas(randomPrefix('gap2'));
  await writer.invalidate('k');
  await sleep(5);
  expect(await filler.getOrCompute('k', () => 'after')).toBe('after');
  let fills = 0;
  expect(await writer.getOrCompute('k', () => (fills++, 'again'))).toBe('after');
  expect(fills).toBe(0);
});

it('the hit path is still one MGET', async () => {
  const prefix = randomPrefix('gap3');
  const { writer, filler } = replicas(prefix);
  await writer.invalidate('k');
  await sleep(5);
  await filler.getOrCompute('k', () => 'v');
  const reader = createCache({ ttl: 60_000, store: redisStore({ client: b, prefix }) });
  // A key this store never read goes to the script that would also lock it if missing: found,
  // it is returned untried (one GET in the script, no lock, no subscriber opened).
  const first = await roundTrips(a, b, () => reader.getOrCompute('k', () => 'other'));
  expect(first.commands).toEqual({ [first.commands.eval === undefined ? 'evalsha' : 'eval']: 1, get: 1 });
  // Read present since: a plain MGET, the invalidation marker untouched.
  const { commands } = await roundTrips(a, b, () => reader.getOrCompute('k', () => 'other'));
  expect(commands).toEqual({ mget: 1 });
});

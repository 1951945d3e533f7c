/**
 * The tiered store's getMany asks its L2 for the keys L1 does not have: an L2 read that fails in
 * part (a Cluster master down) answers, and names its failed positions, in THOSE keys. They are
 * put back in the caller's order. Before, they were passed on as they were: one key was served
 * another key's value, and the outage hold was served for a key whose L2 part answered a miss
 * (another replica may have invalidated it).
 *
 * The L2 is the real redisStore on the test's redis-server, wrapped to fail one key's "slot group"
 * exactly as link.call does on a Cluster (StorePartialError(partial, failedAt = that key's position)).
 */
import { StorePartialError } from '../../../src/core/errors';
import type { RedisStore } from '../../../src/redis/redis-store';
import { randomPrefix } from '../helpers';
import { delegatingL2, replica, type Replica } from './helpers';

const control = { failSet: false, failZ: false };

function wrap(l2: RedisStore): RedisStore {
  return delegatingL2(l2, {
    getMany: async (keys) => {
      const zi = keys.findIndex((k) => k.endsWith('zstalled'));
      if (!control.failZ || zi < 0 || keys.length < 2) return l2.getMany(keys);
      const others = keys.filter((_, i) => i !== zi);
      const got = await l2.getMany(others);
      const partial = keys.map((_, i) => (i === zi ? undefined : got[i < zi ? i : i - 1]));
      // As link.call: the failed group's positions, in the keys of THIS call.
      throw new StorePartialError(new Error('master of zstalled down'), partial, 'partial', [zi]);
    },
    setMany: (writes) => (control.failSet ? Promise.reject(new Error('write refused (outage)')) : l2.setMany(writes)),
  });
}

let r: Replica;
afterAll(async () => {
  await r?.close();
});

it('a key the L2 answered as a miss is not served from the outage hold', async () => {
  r = await replica({ prefix: randomPrefix('review-failedat'), wrapL2: wrap, cache: { ttl: 60_000, lock: false } });
  let version = 1;
  const fills: string[] = [];
  const users = r.cache.loader<string, string>({
    name: 'user',
    // A 100 ms window between a load and its read (DataLoader's batchScheduleFn).
    batchScheduleFn: (dispatch) => setTimeout(dispatch, 100),
    batch: async (ids) => ids.map((id) => (fills.push(id), `${id}-v${version}`)),
  });
  // y filled while the store could not take it: held (outage) for 1 s.
  control.failSet = true;
  expect(await users.load('y')).toBe('y-v1');
  control.failSet = false;
  version = 2; // y's data changed (L2 has no y: a miss, so y must be filled again)
  await r.l2.setMany([]); // no-op
  // x is in L2 (written by another replica)
  const now = Date.now();
  await r.l2.setMany([
    {
      key: 'user:x',
      entry: { value: 'x-v2', freshUntil: now + 60_000, staleUntil: now + 60_000, createdAt: now } as never,
      ttl: 60_000,
    },
  ]);
  control.failZ = true;
  // One read for x, y, zstalled: x's L1 copy appears while the batch is scheduled.
  const loads = [users.load('x'), users.load('y'), users.load('zstalled')];
  await r.store.getMany(['user:x']); // promotes x into L1 (as any concurrent read would)
  expect(r.store.getSync('user:x')?.value).toBe('x-v2');
  const values = await Promise.all(loads);
  // y: its L2 group answered, a miss: it must be filled again (y-v2), never the held y-v1.
  expect(values[1]).toBe('y-v2');
});

it("the partial answer is put back in the caller's order: each key gets its own value", async () => {
  control.failSet = false;
  control.failZ = false;
  const fills: string[] = [];
  const users = r.cache.loader<string, string>({
    name: 'acct',
    batchScheduleFn: (dispatch) => setTimeout(dispatch, 100),
    batch: async (ids) => ids.map((id) => (fills.push(id), `${id}-filled`)),
  });
  const now = Date.now();
  const entry = (value: string) =>
    ({ value, freshUntil: now + 60_000, staleUntil: now + 60_000, createdAt: now }) as never;
  await r.l2.setMany([
    { key: 'acct:a', entry: entry('value-of-a'), ttl: 60_000 },
    { key: 'acct:b', entry: entry('value-of-b'), ttl: 60_000 },
  ]);
  control.failZ = true;
  const loads = [users.load('a'), users.load('b'), users.load('zstalled')];
  await r.store.getMany(['acct:a']); // a's L1 copy appears while the batch is scheduled
  const values = await Promise.all(loads);
  expect(values[0]).toBe('value-of-a');
  expect(values[1]).toBe('value-of-b');
});

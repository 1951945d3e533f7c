/**
 * The releases of the last lockTtl are sent again when the client reconnects (release-ledger.ts),
 * driven by the client's `ready`: a replica that makes no store call after the reconnection (idle
 * on Redis) still releases the locks a failover brought back, instead of leaving every other
 * replica's load of those keys to wait lockWaitTimeout. Once per reconnection, whether a call or
 * the `ready` sees it first. On a server of this file's own: the release scripts are counted.
 */
import type Redis from 'ioredis';
import { redisStore } from '../../src/redis/redis-store';
import type { RedisFillLock } from '../../src/redis/redis-lock';
import { commandCalls, delta, entry, eventually, ownServer, randomPrefix, sleep } from './helpers';

const own = ownServer();
/** Far longer than any wait here: a lock that disappears was released, not expired. */
const LOCK_TTL = 30_000;

async function replica(label: string) {
  const client = await own.connection();
  const prefix = randomPrefix(label);
  const store = redisStore({ client, prefix });
  return { client, store, lock: store.lock as RedisFillLock, lockKey: (key: string) => `${prefix}{${key}}:lock` };
}

/**
 * A released lock and a fenced write's lock, brought back as a promoted replica that missed
 * their releases would have them (plus a lock still in use, never released): two releases kept.
 */
async function releasedThenRestored(lock: RedisFillLock, lockKey: (key: string) => string): Promise<void> {
  const won = await lock.acquire(['done', 'written', 'busy'], 'tok', LOCK_TTL);
  expect(won.map((attempt) => attempt?.won)).toEqual([true, true, true]);
  await lock.release(['done'], 'tok');
  expect(await lock.writeAndRelease([{ key: 'written', entry: entry('v'), ttl: 60_000 }], 'tok')).toEqual([true]);
  expect(lock.unreleased.releases).toBe(2);
  await own.admin.set(lockKey('done'), 'tok', 'PX', LOCK_TTL);
  await own.admin.set(lockKey('written'), 'tok', 'PX', LOCK_TTL);
}

/** Scripts run on the server (the release script is one call per release sent). */
function scripts(calls: Record<string, number>): number {
  return (calls.evalsha ?? 0) + (calls.eval ?? 0);
}

it('a replica that makes no call after reconnecting still sends its recent releases again', async () => {
  const { client, lock, lockKey } = await replica('idle');
  await releasedThenRestored(lock, lockKey);
  client.disconnect(true); // ioredis reconnects by itself
  // No call of this store from here on: only the client's ready can trigger the replay.
  expect(await eventually(async () => (await own.admin.exists(lockKey('done'), lockKey('written'))) === 0, 5000)).toBe(
    true,
  );
  expect(await own.admin.get(lockKey('busy'))).toBe('tok');
});

it('once per reconnection: a call that sees the new connection before its ready does not send them twice', async () => {
  const { client, store, lock, lockKey } = await replica('once');
  await releasedThenRestored(lock, lockKey);
  const before = await commandCalls(own.admin);
  // Runs before the store's own ready listener: the call's check sees the reconnection first.
  client.prependOnceListener('ready', () => void store.getMany(['x']).catch(() => undefined));
  client.disconnect(true);
  expect(await eventually(async () => (await own.admin.exists(lockKey('done'), lockKey('written'))) === 0, 5000)).toBe(
    true,
  );
  // Replies of any second round would have landed by now (a loopback round trip is well under this).
  await sleep(300);
  await store.getMany(['y']);
  expect(scripts(delta(before, await commandCalls(own.admin)))).toBe(2);
});

it('close() removes the store’s ready listener from the client; calls still notice a reconnection', async () => {
  const client: Redis = await own.connection();
  const listeners = client.listenerCount('ready');
  const prefix = randomPrefix('closed');
  const store = redisStore({ client, prefix });
  expect(client.listenerCount('ready')).toBe(listeners + 1);
  const lock = store.lock as RedisFillLock;
  const lockKey = (key: string) => `${prefix}{${key}}:lock`;
  await releasedThenRestored(lock, lockKey);
  await store.close();
  expect(client.listenerCount('ready')).toBe(listeners);
  const closed = new Promise((resolve) => client.once('close', resolve));
  client.disconnect(true);
  await closed; // until then the status still reads "ready"
  expect(await eventually(() => client.status === 'ready', 5000)).toBe(true);
  // Not listening: the first call that finds the client reconnected sends them.
  await store.getMany(['x']);
  expect(await eventually(async () => (await own.admin.exists(lockKey('done'), lockKey('written'))) === 0, 5000)).toBe(
    true,
  );
});

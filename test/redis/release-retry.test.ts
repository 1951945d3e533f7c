/**
 * A lock release that did not reach the Redis holding the lock is sent again, for as long as the
 * lock could still be ours (release-ledger.ts): a release that failed (client not connected, as in
 * a failover or a restart) when the client is back; every recent release when the client
 * reconnects (one that landed on a master lost right after). Compare-and-delete by token: a lock
 * still in use, or another's, is untouched. Each lock here lives 30 s, far longer than the test
 * waits: a lock that disappears was released, not expired.
 */
import type Redis from 'ioredis';
import { redisStore } from '../../src/redis/redis-store';
import type { RedisFillLock } from '../../src/redis/redis-lock';
import { connect, entry, eventually, randomPrefix } from './helpers';

const clients: Redis[] = [];
let admin: Redis;
beforeAll(async () => {
  admin = await connect();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  admin.disconnect();
});

const LOCK_TTL = 30_000;

async function store(label: string) {
  const client = await connect(undefined, { retryStrategy: () => 20 });
  client.on('error', () => {});
  clients.push(client);
  const prefix = randomPrefix(label);
  const made = redisStore({ client, prefix });
  return {
    client,
    prefix,
    store: made,
    lock: made.lock as RedisFillLock,
    lockKey: (key: string) => `${prefix}{${key}}:lock`,
  };
}

/** Drops the connection and waits until ioredis has seen it go (status no longer "ready"). */
async function dropped(client: Redis): Promise<void> {
  const closed = new Promise((resolve) => client.once('close', resolve));
  client.disconnect(true);
  await closed;
}

/** Drops the connection; ioredis reconnects by itself (a failover's disconnect, a network blip). */
async function reconnect(client: Redis): Promise<void> {
  await dropped(client);
  expect(await eventually(() => client.status === 'ready', 5000)).toBe(true);
}

it('a release that failed (client not connected) is sent again once the client is back', async () => {
  const { client, lock, lockKey } = await store('release-retry');
  expect((await lock.acquire(['k'], 't1', LOCK_TTL))[0]?.won).toBe(true);
  await dropped(client);
  await expect(lock.release(['k'], 't1')).rejects.toMatchObject({ code: 'E_STORE_UNAVAILABLE' });
  expect(lock.unreleased.failed).toBe(1);
  expect(await admin.exists(lockKey('k'))).toBe(1);
  expect(await eventually(async () => (await admin.exists(lockKey('k'))) === 0, 5000)).toBe(true);
  // Its reply may reach this client after the admin's: the ledger marks it landed then.
  expect(await eventually(() => lock.unreleased.failed === 0, 5000)).toBe(true);
});

it('after a reconnection, recent releases are sent again: a lock the old master lost comes back released', async () => {
  const { client, store: s, lock, lockKey } = await store('release-replay');
  const attempts = await lock.acquire(['done', 'written', 'busy', 'taken'], 't2', LOCK_TTL);
  expect(attempts.map((a) => a?.won)).toEqual([true, true, true, true]);
  await lock.release(['done'], 't2');
  expect(await lock.writeAndRelease([{ key: 'written', entry: entry('v'), ttl: 60_000 }], 't2')).toEqual([true]);
  await lock.release(['taken'], 't2');
  // What a failover can do: the promoted replica got the locks but not their releases.
  await admin.set(lockKey('done'), 't2', 'PX', LOCK_TTL);
  await admin.set(lockKey('written'), 't2', 'PX', LOCK_TTL);
  // Meanwhile another replica took this one: not ours any more.
  await admin.set(lockKey('taken'), 'other', 'PX', LOCK_TTL);
  await reconnect(client);
  // The first call that finds the client reconnected sends the recent releases again.
  await s.getMany(['x']);
  expect(await eventually(async () => (await admin.exists(lockKey('done'), lockKey('written'))) === 0, 5000)).toBe(
    true,
  );
  // Untouched: a lock still in use (its fill is not over), and another token's.
  expect(await admin.get(lockKey('busy'))).toBe('t2');
  expect(await admin.get(lockKey('taken'))).toBe('other');
});

it('nothing is sent again for a token whose locks expired', async () => {
  const { client, store: s, lock, lockKey } = await store('release-expired');
  expect((await lock.acquire(['k'], 't3', 50))[0]?.won).toBe(true);
  await lock.release(['k'], 't3');
  // Kept 50 ms at most (its lock's ttl), then dropped.
  expect(await eventually(() => lock.unreleased.releases === 0, 5000)).toBe(true);
  await admin.set(lockKey('k'), 't3', 'PX', LOCK_TTL); // would be deleted by a replay
  await reconnect(client);
  await s.getMany(['x']);
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(await admin.get(lockKey('k'))).toBe('t3');
});

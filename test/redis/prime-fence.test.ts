/**
 * loader.prime() on one replica against a fill of the same key in flight on another: the fill read
 * the database before the write that the prime publishes, so its older value must not land over
 * the primed one (with the fill lock: its fenced write is refused; without: its unlocked write is
 * refused by the key's invalidation marker). In the process the flight is abandoned (core tests).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { redisStore } from '../../src/redis/redis-store';
import { tieredStore } from '../../src/redis/tiered';
import { connect, randomPrefix } from './helpers';

const clients: Redis[] = [];
afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit()));
});
async function client(): Promise<Redis> {
  const made = await connect();
  clients.push(made);
  return made;
}

describe.each([
  ['redisStore, with the fill lock', 'redis', true],
  ['redisStore, without the lock', 'redis', false],
  ['tieredStore, with the fill lock', 'tiered', true],
] as const)('%s', (_name, kind, lock) => {
  it("a prime on replica A is not overwritten by B's fill that started before it", async () => {
    const prefix = randomPrefix('prime-fence');
    const store = async () =>
      kind === 'redis'
        ? redisStore({ client: await client(), prefix })
        : tieredStore({ l2: redisStore({ client: await client(), prefix }), subscriber: await client() });
    const a = createCache({ ttl: 60_000, lock, store: await store() });
    const b = createCache({ ttl: 60_000, lock, store: await store() });
    try {
      let db = 'old';
      const fills = { a: 0, b: 0 };
      let reading!: () => void;
      const read = new Promise<void>((resolve) => (reading = resolve));
      let finish!: () => void;
      const finishing = new Promise<void>((resolve) => (finish = resolve));
      const batch = (replica: 'a' | 'b') => async (keys: readonly string[]) => {
        fills[replica]++;
        const seen = db;
        reading();
        await finishing;
        return keys.map(() => seen);
      };
      const onA = a.loader<string, string>({ name: 'user', batch: batch('a') });
      const onB = b.loader<string, string>({ name: 'user', batch: batch('b') });
      const filling = onB.load('1'); // B reads the old row…
      await read;
      db = 'new'; // …A writes the row and primes the shared value
      await onA.prime('1', 'new');
      finish(); // B's fill ends with what it read before the write
      // Its caller gets what it read; a tiered replica hears of the prime and starts over instead.
      expect(await filling).toBe(kind === 'tiered' ? 'new' : 'old');
      // Both replicas read the primed value, no fill: B's older value did not land over it.
      expect(await onA.load('1')).toBe('new');
      expect(await onB.load('1')).toBe('new');
      // B's older value did not land over the primed one: A never filled. A tiered B hears the
      // prime's fence (its delete) and starts over; when its new read comes between the prime's
      // delete and its write (a loaded machine), it fills again, from the database after the
      // write: one more fill, of the new value.
      expect(fills.a).toBe(0);
      if (kind === 'tiered') expect(fills.b).toBeLessThanOrEqual(2);
      else expect(fills.b).toBe(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

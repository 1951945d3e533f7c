/**
 * The replica that invalidates sees it at once (docs/redis.md): after its `invalidateTags` or
 * `invalidate` returns, it never serves the old value from its own L1. On a Cluster the tag bump
 * waits a round trip for the tag clock first; a read sent in that gap read the old versions and
 * copied the entry into L1 after the first drop, and nothing dropped it again: the replica served
 * the old value until l1Ttl (a reviewer: 5 s, ~10% of reads right after the call). Here the gap is
 * made by holding the L2 call at a gate (a standalone Redis answers too fast to show it).
 */
import type { RedisStore } from '../../../src/redis/redis-store';
import { deferred } from '../../helpers';
import { randomPrefix } from '../helpers';
import { replica, type Replica } from './helpers';

const open: Replica[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

/** A replica whose L2 invalidateTags / delete wait at `gate` (when set) before they are sent. */
async function gatedReplica() {
  const control = { gate: undefined as Promise<void> | undefined };
  const r = await replica({
    prefix: randomPrefix('own-invalidation'),
    cache: { ttl: 60_000, lock: false },
    wrapL2: (l2: RedisStore) => {
      const invalidateTags = l2.invalidateTags.bind(l2);
      const remove = l2.delete.bind(l2);
      l2.invalidateTags = async (tags) => {
        if (control.gate !== undefined) await control.gate;
        return invalidateTags(tags);
      };
      l2.delete = async (keys, options) => {
        if (control.gate !== undefined) await control.gate;
        return remove(keys, options);
      };
      return l2;
    },
  });
  open.push(r);
  return { r, control };
}

it.each([
  ['invalidateTags', (r: Replica) => r.cache.invalidateTags(['Post:1'])],
  ['invalidate', (r: Replica) => r.cache.invalidate('post:1')],
])('%s: a read sent while the change is on its way leaves no old copy in L1', async (_name, change) => {
  const { r, control } = await gatedReplica();
  let version = 1;
  let fills = 0;
  const load = () => r.cache.getOrCompute('post:1', async () => (fills++, `v${version}`), { tags: ['Post:1'] });
  expect(await load()).toBe('v1');
  expect(await load()).toBe('v1'); // from L1
  version = 2;
  const gate = deferred<void>();
  control.gate = gate.promise;
  const changing = change(r);
  // Concurrent with the change (it has not returned): the old value may be read, and L2 still has it.
  expect(await load()).toBe('v1');
  control.gate = undefined;
  gate.resolve();
  await changing;
  expect(await load()).toBe('v2'); // not the copy the read in the gap left in L1
  expect(fills).toBe(2);
});

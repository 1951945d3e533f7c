/**
 * RedisStore.clear's walk: every key under the store's prefix goes, SCAN + UNLINK page by page (on
 * every master in a Cluster), never KEYS, which would block Redis for the whole keyspace.
 */
import type { Cluster, Redis } from 'ioredis';
import { escapeGlob, pick } from './keys';
import type { RedisLink } from './link';

/** SCAN page size hint: large enough to be quick, small enough not to block Redis. */
const SCAN_COUNT = 1000;

/**
 * An admin operation: it walks the keyspace, each command bounded by `commandTimeout`, and keys
 * written while it runs may survive it.
 */
export async function clearPrefix(link: RedisLink): Promise<void> {
  const guard = link.guard;
  const pattern = `${escapeGlob(link.clientPrefix + link.prefix)}{*`;
  // Each page is admitted once, right before the command that settles it: a half-open breaker
  // admits one trial, and an admission that sends nothing would hold that trial forever.
  const nodes = link.cluster ? (link.client as Cluster).nodes('master') : [link.client as Redis];
  const strip = link.clientPrefix.length;
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await guard.run('clear', () => node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT));
      cursor = next;
      if (found.length === 0) continue;
      // The client adds its keyPrefix again on UNLINK: hand it the keys without it.
      const keys = strip === 0 ? found : found.map((key) => key.slice(strip));
      const groups = link.slotGroups(keys);
      const client = link.client;
      await guard.run('clear', () =>
        link.perGroup(groups, (indices) => client.unlink(indices === null ? keys : pick(keys, indices))),
      );
    } while (cursor !== '0');
  }
}

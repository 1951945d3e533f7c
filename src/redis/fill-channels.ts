/**
 * The channels fill announcements travel on (announcements.ts): one per waiting process, named by
 * the prefix and, in a Cluster, by a hash tag of the keys' slot, so that the lock scripts (which
 * may only touch their slot) can publish on them. The scripts append the waiter's id.
 */
import { hashSlot } from './keys';
import type { RedisLink } from './link';

/** Hash-tag strings, one per Cluster slot: `tags[s]` hashes to slot s. Built once, on first use. */
let slotTags: string[] | undefined;

function slotTag(slot: number): string {
  if (slotTags === undefined) {
    const tags = new Array<string>(16384);
    let missing = 16384;
    for (let n = 0; missing > 0; n++) {
      const tag = n.toString(36);
      const s = hashSlot(tag);
      if (tags[s] === undefined) {
        tags[s] = tag;
        missing--;
      }
    }
    slotTags = tags;
  }
  return slotTags[slot]!;
}

/**
 * The channel a write or release script announces its keys on, as the server names it, without
 * the waiter's id (the script appends each registered id): for a standalone server one name per
 * prefix; in a Cluster a shard channel of the keys' own slot (the script may only touch its slot).
 * Every store announces, with or without a subscriber of its own: the waiters may be other
 * processes. Computed per script call, not per key.
 */
export function announceChannel(link: RedisLink, valueKey: string): string {
  if (!link.cluster) return standaloneChannel(link);
  return link.clientPrefix + shardChannel(link, hashSlot(link.clientPrefix + valueKey));
}

export function standaloneChannel(link: RedisLink): string {
  return `${link.prefix}filled.`;
}

/** Without the client's keyPrefix, which ioredis adds to shard channels as it does to keys. */
export function shardChannel(link: RedisLink, slot: number): string {
  return `${link.prefix}filled{${slotTag(slot)}}.`;
}

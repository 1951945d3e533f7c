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

/**
 * The waiter ids of stores that read the value out of an announcement end with this character: a
 * fenced write announces a small value to them with the value (see ANNOUNCE, scripts.ts), to any
 * other id (a store of an earlier version) the key alone. The write script of an earlier version
 * sends such a store the key alone, which it reads as before: fleets of mixed versions still wake.
 */
export const VALUE_READER = '+';

/** Values up to this many bytes travel in the announcement of their write; larger ones are re-read. */
export const ANNOUNCED_VALUE_MAX = 16 * 1024;

/**
 * At most this many bytes of values are announced by one script call, summed over its waiters: a
 * subscriber's output buffer at Redis (pubsub class, 8 MiB soft / 32 MiB hard by default, past which
 * the server drops the connection) never holds more than this of them from one call.
 */
export const ANNOUNCED_BYTES_PER_CALL = 1024 * 1024;

/** Hex digits of each length (the key's, the token's) that end a message with a value. */
const LENGTH_DIGITS = 8;
const TRAILER = 2 * LENGTH_DIGITS;

const CLOSE_BRACE = 0x7d;

/** One message on a fill channel: the key announced, and what a message with a value carries. */
export interface Announcement {
  readonly key: string;
  /** The lock token the value was written under (undefined: no value carried). */
  readonly token: string | undefined;
  /** The payload written; a copy (a codec may keep what it is given), as text for a text codec. */
  readonly payload: string | Buffer | undefined;
}

/**
 * One message on a fill channel, as the scripts publish it: the value key alone (a release, a large
 * value, a store of an earlier version), or the value key, the lock token it was written under,
 * the payload, then the key's and the token's lengths in 8 hex digits each. A value key always
 * ends with '}' (`prefix{K}`) and hex digits never do, so the last byte tells the two apart.
 */
export function parseAnnouncement(message: Buffer, binary: boolean): Announcement {
  const n = message.length;
  if (n <= TRAILER || message[n - 1] === CLOSE_BRACE) return plain(message);
  const keyLength = parseInt(message.toString('latin1', n - TRAILER, n - LENGTH_DIGITS), 16);
  const tokenLength = parseInt(message.toString('latin1', n - LENGTH_DIGITS, n), 16);
  const end = n - TRAILER;
  if (!(keyLength > 0 && tokenLength > 0 && keyLength + tokenLength <= end && message[keyLength - 1] === CLOSE_BRACE))
    return plain(message);
  const valueStart = keyLength + tokenLength;
  return {
    key: message.toString('utf8', 0, keyLength),
    token: message.toString('utf8', keyLength, valueStart),
    payload: binary ? Buffer.from(message.subarray(valueStart, end)) : message.toString('utf8', valueStart, end),
  };
}

function plain(message: Buffer): Announcement {
  return { key: message.toString(), token: undefined, payload: undefined };
}

/**
 * Redis key layout and Cluster hash slots.
 *
 * A cache key K is stored at `prefix{K}`, its fill lock at `prefix{K}:lock` and the ids of the
 * processes waiting on that lock at `prefix{K}:waiters`. The braces are a Cluster hash tag: the
 * three keys hash on K alone, so they share a slot and one script can touch them all.
 * A tag T's version is kept at `prefixtag:{T}`: never matched by the `prefix{*` of clear(), so
 * clearing entries does not reset versions (an entry written while clear() runs keeps its fence).
 * Beside it, `prefixtag:{T}:seq` (the tag clock at T's last invalidation) and one `prefixtag:clock`.
 */
import { createHash } from 'node:crypto';

/** Hex sha256 (64 chars) plus the '#' separating it from the readable head. */
const HASHED_TAIL = 65;
export const MIN_KEY_LENGTH = HASHED_TAIL;

const CLOSE_BRACE = 125;

/** Appended to a value key to name its fill lock: same hash tag, so same slot. */
export const LOCK_SUFFIX = ':lock';

/** Appended to a value key to name its invalidation marker (the time of its last invalidation). */
export const INVALIDATED_SUFFIX = ':inv';

/** Appended to a value key to name the processes waiting on its lock (scripts.ts, WAITERS). */
export const WAITERS_SUFFIX = ':waiters';

/**
 * The part of a key that goes between the braces. Injective: two distinct keys never share it,
 * whatever characters they hold.
 *
 * A key is stored as it is (raw) when it can be told apart from every hashed form and survives
 * UTF-8 (which is how ioredis sends it); otherwise it is hashed: a readable head, '#', and the
 * sha256 hex of the key (exactly `maxKeyLength` chars, or 65 without a head). Hashed are:
 * - keys longer than `maxKeyLength`;
 * - keys that end like a hashed form ('#' + 64 lowercase hex digits): stored raw, such a key could
 *   be another key's hashed form, and whoever controls part of a key could write over another's;
 * - keys with a lone surrogate: UTF-8 has no encoding for one (ioredis would send U+FFFD, so
 *   '\uD800' and '\uDBFF' would be one Redis key);
 * - empty keys and keys starting with '}': Redis ignores an empty hash tag (`{}`) and would hash the
 *   whole key, which puts a value and its lock in two slots. (A '}' later in the key only shortens
 *   the tag, and both keys still share it.)
 * Raw keys never end like a hashed form, hashed forms always do: the two sets cannot meet. Hashed
 * forms differ when the hashed bytes differ: a well-formed key is hashed as its UTF-8 (so hashed
 * keys keep their names from earlier versions), a key with a lone surrogate as the byte 0xFF (never
 * part of UTF-8) followed by its UTF-16 code units, so each key has its own bytes.
 */
export function taggedKey(key: string, maxKeyLength: number): string {
  const length = key.length;
  if (
    length <= maxKeyLength &&
    length > 0 &&
    key.charCodeAt(0) !== CLOSE_BRACE &&
    !endsLikeHashed(key) &&
    wellFormed(key)
  )
    return key;
  const head = key.charCodeAt(0) === CLOSE_BRACE ? '' : key.slice(0, maxKeyLength - HASHED_TAIL);
  const hash = createHash('sha256');
  if (wellFormed(key)) hash.update(key, 'utf8');
  else hash.update(ILL_FORMED_MARK).update(key, 'utf16le');
  return `${head}#${hash.digest('hex')}`;
}

/** Precedes the UTF-16 code units of a key with a lone surrogate: 0xFF never occurs in UTF-8. */
const ILL_FORMED_MARK = Buffer.from([0xff]);

const HASH_MARK = 35; // '#'

/** No lone surrogate (String.prototype.isWellFormed, which ES2022 typings lack). */
function wellFormed(key: string): boolean {
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c > 0xdbff) return false; // a low surrogate without its high one
    const next = key.charCodeAt(i + 1); // NaN past the end
    if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
    i++;
  }
  return true;
}

/** Whether `key` ends with '#' and 64 lowercase hex digits, as every hashed form does. */
function endsLikeHashed(key: string): boolean {
  const at = key.length - HASHED_TAIL;
  if (at < 0 || key.charCodeAt(at) !== HASH_MARK) return false;
  for (let i = at + 1; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/** Between the prefix and a tag's hash tag: a tag version key never looks like a value key. */
export const TAG_INFIX = 'tag:';

/** The key holding a tag's version (set by invalidateTags from the server's clock; made by a read that finds none). */
export function tagVersionKey(prefix: string, tag: string, maxKeyLength: number): string {
  return `${prefix}${TAG_INFIX}{${taggedKey(tag, maxKeyLength)}}`;
}

/**
 * Appended to a tag's version key to name the tag clock's reading at its last invalidation (same
 * hash tag, so same slot: read with the version in one MGET). See tag-clock.ts.
 */
export const TAG_SEQUENCE_SUFFIX = ':seq';

/** The fleet's tag clock (tag-clock.ts): one key per prefix, never matched by clear()'s `prefix{*`. */
export function tagClockKey(prefix: string): string {
  return `${prefix}${TAG_INFIX}clock`;
}

/** Escapes glob metacharacters so a prefix can be used in SCAN MATCH. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

// CRC16/XMODEM, the checksum Redis Cluster uses for slots (crc16(tag) mod 16384).
const CRC_TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c = i << 8;
  for (let bit = 0; bit < 8; bit++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
  CRC_TABLE[i] = c;
}

function crcByte(crc: number, byte: number): number {
  return ((crc << 8) & 0xffff) ^ CRC_TABLE[((crc >> 8) ^ byte) & 0xff]!;
}

/**
 * The Cluster slot of a full Redis key, as `CLUSTER KEYSLOT` computes it: over the UTF-8 bytes of
 * the hash tag when there is a non-empty one, else of the whole key. Encodes UTF-8 on the fly
 * (lone surrogates as U+FFFD, as Buffer.from does) so no Buffer is allocated per key.
 */
export function hashSlot(key: string): number {
  let start = 0;
  let end = key.length;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    let c = key.charCodeAt(i);
    if (c < 0x80) {
      crc = crcByte(crc, c);
      continue;
    }
    if (c < 0x800) {
      crc = crcByte(crcByte(crc, 0xc0 | (c >> 6)), 0x80 | (c & 0x3f));
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < end ? key.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        crc = crcByte(crc, 0xf0 | (cp >> 18));
        crc = crcByte(crc, 0x80 | ((cp >> 12) & 0x3f));
        crc = crcByte(crc, 0x80 | ((cp >> 6) & 0x3f));
        crc = crcByte(crc, 0x80 | (cp & 0x3f));
        i++;
        continue;
      }
      c = 0xfffd;
    }
    crc = crcByte(crc, 0xe0 | (c >> 12));
    crc = crcByte(crc, 0x80 | ((c >> 6) & 0x3f));
    crc = crcByte(crc, 0x80 | (c & 0x3f));
  }
  return crc & 16383;
}

/**
 * Groups positions by a numeric or string group id, keeping first-seen order. `groupOf` is called
 * once per position; one array per group, no per-key closure.
 */
export function groupPositions(count: number, groupOf: (index: number) => number | string): number[][] {
  const byId = new Map<number | string, number[]>();
  for (let i = 0; i < count; i++) {
    const id = groupOf(i);
    const group = byId.get(id);
    if (group === undefined) byId.set(id, [i]);
    else group.push(i);
  }
  return [...byId.values()];
}

export function pick<T>(items: readonly T[], indices: readonly number[]): T[] {
  const out = new Array<T>(indices.length);
  for (let j = 0; j < indices.length; j++) out[j] = items[indices[j]!]!;
  return out;
}

/** value key, lock key, value key, lock key, … for the picked positions (all when null). */
export function withLockKeys(valueKeys: readonly string[], indices: readonly number[] | null): string[] {
  const count = indices === null ? valueKeys.length : indices.length;
  const out = new Array<string>(2 * count);
  for (let j = 0; j < count; j++) {
    const key = valueKeys[indices === null ? j : indices[j]!]!;
    out[2 * j] = key;
    out[2 * j + 1] = key + LOCK_SUFFIX;
  }
  return out;
}

/**
 * Long keys held in process as a fixed-size digest. A key (a getOrCompute key, a loader's
 * `name:key`, a @cached field's key) or a tag may be derived from client input of any length; the
 * registry keeps keys in its in-flight table, the memory store keeps them (and tags, in its tag
 * index) for as long as the entry lives, and a Redis store sends them. So a key longer than
 * LONG_KEY_MAX characters is replaced, before any of them sees it, by
 * `<its first 64 characters>…#<sha256 of the key, base64url>` (109 characters): readable in a
 * hook or a key listing, bounded in memory.
 *
 * Injective in practice: two hashed keys meet only if their sha256 do (the key is hashed as its
 * UTF-16 code units, so lone surrogates are told apart too). A raw key never equals a hashed one:
 * a key of any length that ends like a hashed form (`…#` and 43 base64url characters) is hashed
 * too, so every key ending so is a digest. The head is the key's own first characters, so a raw key
 * (which may not start with U+0000) keeps not starting with it and a namespaced key keeps its
 * namespace head (see ./namespaces): hashing moves no key into or out of a namespace.
 */
import { createHash } from 'node:crypto';

/** Keys (and tags) longer than this many UTF-16 code units are held as their digest. */
export const LONG_KEY_MAX = 1024;

/**
 * Longest key (or key part) a process-wide memo remembers (a loader's `name:key` per key, a
 * @cached field's key per parent identity): such memos outlive requests, and their keys are client
 * input as often as not, so a long one is rebuilt per call instead of held.
 */
export const MEMO_KEY_MAX = 256;

/** How many leading characters of a long key its digest keeps, readable. */
const HEAD = 64;
/** '…' (U+2026) then '#': what separates the readable head from the digest. */
const MARK = '\u2026#';
/** A sha256 in base64url, without padding. */
const DIGEST_LENGTH = 43;
const TAIL = MARK.length + DIGEST_LENGTH;
/** The length of every hashed key (or less, when the head is cut short of a surrogate pair). */
export const HASHED_KEY_LENGTH = HEAD + TAIL;

const ELLIPSIS = 0x2026;
const HASH = 35; // '#'

/**
 * `key` as the registry and the stores hold it: itself when short, else its digest (see above).
 * The hit path pays two comparisons for a short key.
 */
export function boundedKey(key: string): string {
  const length = key.length;
  if (length <= LONG_KEY_MAX && !endsLikeDigest(key, length)) return key;
  return digestKey(key);
}

/** boundedKey for each key; the same array when none is long. */
export function boundedKeys(keys: readonly string[]): readonly string[] {
  let out: string[] | undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const bounded = boundedKey(key);
    if (bounded !== key) (out ??= keys.slice())[i] = bounded;
  }
  return out ?? keys;
}

/** The digest form of `key`, whatever its length. */
export function digestKey(key: string): string {
  let headLength = Math.min(HEAD, key.length);
  // Not half a surrogate pair: the head stays well-formed (UTF-8 has no encoding for half of one).
  const last = key.charCodeAt(headLength - 1);
  if (last >= 0xd800 && last <= 0xdbff) headLength--;
  const digest = createHash('sha256').update(key, 'utf16le').digest('base64url');
  // Copied out, not sliced: V8 makes a slice of a long string a view that keeps the whole string
  // alive, which is exactly what the digest must not do.
  return Buffer.from(key.slice(0, headLength) + MARK + digest, 'utf16le').toString('utf16le');
}

/** Whether `key` ends with '…#' and 43 base64url characters, as every digest does. */
function endsLikeDigest(key: string, length: number): boolean {
  const at = length - TAIL;
  if (at < 0 || key.charCodeAt(at + 1) !== HASH || key.charCodeAt(at) !== ELLIPSIS) return false;
  return digestTail(key, at + 2, length);
}

/** Whether `key` is base64url from `from` to `length` (apart: the hit path inlines only the check above). */
function digestTail(key: string, from: number, length: number): boolean {
  for (let i = from; i < length; i++) {
    const c = key.charCodeAt(i);
    // A-Z a-z 0-9 - _
    if (!((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 95)) return false;
  }
  return true;
}

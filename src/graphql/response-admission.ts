/**
 * Which misses the response layer stores (./response-cache): an operation whose stored responses
 * are never read (a page per product id, each asked once: "one-hit wonders") pays for its walk and
 * its write on every miss and gains nothing from them. Once `limit` of an operation's responses
 * were stored in a row and none of its responses was read meanwhile, its misses are stored only
 * when asked a second time, or as a sample: 1 in `limit` of them, then 1 in twice as many after each
 * sample stored, down to 1 in SAMPLE_BACKOFF × `limit` (the others are answered to the request that
 * executed them and not stored: `not_admitted`), until a response of it is read again (a hit, a
 * stale hit, or a request that joined an execution): then every miss is stored again. Varnish's
 * hit-for-miss, per operation, with a doorkeeper. A stored response nobody reads costs far more
 * than its miss (its walk, its copy, its write, and the collector moving it until it is evicted:
 * ~45 µs each in a loop of misses), so a sample that keeps finding nothing read grows rarer.
 *
 * The second ask: the keys of the last 2,048 to 4,096 misses left unstored are remembered (as
 * 32-bit digests, in two generations of sets), and a miss of one of them is stored. So a page
 * asked again among one-off pages is stored at its second miss, whatever the order of the
 * requests (a fixed 1-in-`limit` sample alone never stored a page asked every second request: the
 * sample fell on the one-off pages each time). A digest collision stores a miss that need not
 * have been: harmless. The sample keeps finding out whether the operation's responses are asked
 * again when its pages come back only after the remembered ones.
 *
 * Only a miss no other request of this process waits on can be left unstored (the engine asks
 * this only then): one with waiters is a read already, and is stored and shared as any other, so
 * a result is never handed to another request without being walked (its tags, its own copy).
 *
 * Kept per operation (its static policy, one object per parsed document and operation name while
 * the server keeps the document: Apollo's and Yoga's document caches), in a WeakMap: an operation
 * the server forgot takes its counts with it. Only results actually stored count (one too large,
 * or that could not be tagged, is not a store).
 */
import type { StaticPolicy } from './response-policy';

interface Reads {
  /** Responses stored since a response of the operation was last read. */
  unread: number;
  /** Misses not stored since the last one stored. */
  skipped: number;
  /** The sample: 1 miss stored in this many (`limit`, doubled after each, up to SAMPLE_BACKOFF × `limit`). */
  every: number;
}

/** How much rarer than 1 in `limit` the sample of an operation never read grows (see the module). */
const SAMPLE_BACKOFF = 32;

/** Digests of unstored misses remembered per generation (two generations: see the module). */
const REMEMBERED = 2048;

export class Admission {
  readonly #limit: number;
  readonly #operations = new WeakMap<StaticPolicy, Reads>();
  /** Digests of the keys of recent misses left unstored: this generation's and the last. */
  #recent = new Set<number>();
  #older = new Set<number>();

  /** `limit`: see the module; 0 stores every response. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Whether the operation's misses may be left unstored now (its last `limit` stores unread): admits() may say no. */
  skipping(operation: StaticPolicy): boolean {
    const reads = this.#operations.get(operation);
    return reads !== undefined && this.#limit !== 0 && reads.unread >= this.#limit;
  }

  /** Whether to store the result of this miss of `key`, no request waiting on it (counts the misses it skips). */
  admits(operation: StaticPolicy, key: string): boolean {
    if (this.#limit === 0) return true;
    const reads = this.#operations.get(operation);
    if (reads === undefined || reads.unread < this.#limit) return true;
    const digest = digestOf(key);
    if (this.#recent.has(digest) || this.#older.has(digest)) return true; // asked again: stored
    if (++reads.skipped >= reads.every) {
      reads.skipped = 0;
      if (reads.every < this.#limit * SAMPLE_BACKOFF) reads.every *= 2;
      return true;
    }
    if (this.#recent.size >= REMEMBERED) {
      this.#older = this.#recent;
      this.#recent = new Set();
    }
    this.#recent.add(digest);
    return false;
  }

  /** A response of the operation was stored. */
  stored(operation: StaticPolicy): void {
    if (this.#limit === 0) return;
    const reads = this.#operations.get(operation);
    if (reads === undefined) this.#operations.set(operation, { unread: 1, skipped: 0, every: this.#limit });
    else reads.unread++;
  }

  /** A response of the operation was read: every miss of it is stored again. */
  read(operation: StaticPolicy): void {
    const reads = this.#operations.get(operation);
    if (reads !== undefined && reads.unread > 0) {
      reads.unread = 0;
      reads.skipped = 0;
      reads.every = this.#limit;
    }
  }
}

/** Code units of a key's end its digest reads: where keys of one operation differ (its variables, session, vary parts). */
const DIGEST_TAIL = 48;

/**
 * FNV-1a over the key's last DIGEST_TAIL UTF-16 code units and its length, 32 bits: a key's head
 * (the response namespace, the schema's and the document's hashes) is the same for every key of an
 * operation, and hashing it cost more than the rest of the admission. Two keys alike in their last
 * 48 code units and length share a digest: the second is taken for asked again, and stored (harmless).
 */
function digestOf(key: string): number {
  let hash = 0x811c9dc5 ^ key.length;
  for (let i = Math.max(0, key.length - DIGEST_TAIL); i < key.length; i++)
    hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return hash >> 1; // 31 bits: a small integer to V8, kept in the Sets without a heap number each
}

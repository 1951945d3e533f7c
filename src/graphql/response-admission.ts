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
 * The second ask: the digests (32 bits) of the keys of recent misses left unstored are remembered
 * in a table of 16,384 slots, one per digest's low bits (a later digest on the same slot takes it),
 * and a miss of one of them is stored. So a page asked again among one-off pages is stored at its
 * second miss, whatever the order of the requests (a fixed 1-in-`limit` sample alone never stored
 * a page asked every second request: the sample fell on the one-off pages each time), while its
 * slot holds it: after 2,048 other unstored misses, 88 in 100 are still remembered. A digest
 * collision stores a miss that need not have been: harmless. The table is one read per miss, where
 * sets of the last few thousand digests cost several (a miss's bookkeeping runs with the CPU's
 * caches cold: every memory read counts). The sample keeps finding out whether the operation's
 * responses are asked again when its pages come back only after the remembered ones.
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

/** What the store step asks of a miss's admission (an Admission, or a verdict given already: ADMITTED, NOT_ADMITTED). */
export interface Admits {
  admits(operation: StaticPolicy, key: string): boolean;
}

/** The verdict of a miss whose admission was decided before it executed (ResponseEngine#lookup). */
export const ADMITTED: Admits = { admits: () => true };
export const NOT_ADMITTED: Admits = { admits: () => false };

/** An operation's counts (opaque outside): what a known operation keeps for its admission (see decide). */
export type OperationReads = Reads;

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

/** Slots of the table of unstored misses' digests (a power of two: see the module). */
const REMEMBERED = 16_384;

export class Admission implements Admits {
  readonly #limit: number;
  readonly #operations = new WeakMap<StaticPolicy, Reads>();
  /** Digests of the keys of recent misses left unstored, each in the slot of its low bits (0: none). */
  readonly #recent = new Uint32Array(REMEMBERED);

  /** `limit`: see the module; 0 stores every response. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Whether to store the result of this miss of `key`, no request waiting on it (counts the misses it skips). */
  admits(operation: StaticPolicy, key: string): boolean {
    return this.decide(operation, key) ?? true;
  }

  /**
   * admits(), or undefined when the operation stores every miss now (not skipping: fewer than
   * `limit` stores unread since its last read): the engine runs a miss it leaves unstored solo.
   * `known`: where the operation's counts are kept for the next call.
   */
  decide(operation: StaticPolicy, key: string, known?: { reads: OperationReads | undefined }): boolean | undefined {
    if (this.#limit === 0) return undefined;
    // An operation's counts, once made, stay its own: a known operation keeps them (no WeakMap read).
    let reads = known?.reads;
    if (reads === undefined) {
      reads = this.#operations.get(operation);
      if (reads === undefined) return undefined;
      if (known !== undefined) known.reads = reads;
    }
    if (reads.unread < this.#limit) return undefined;
    const digest = digestOf(key);
    const slot = digest & (REMEMBERED - 1);
    if (this.#recent[slot] === digest) return true; // asked again: stored
    if (++reads.skipped >= reads.every) {
      reads.skipped = 0;
      if (reads.every < this.#limit * SAMPLE_BACKOFF) reads.every *= 2;
      return true;
    }
    this.#recent[slot] = digest;
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
 * FNV-1a over the key's last DIGEST_TAIL UTF-16 code units and its length, 32 bits, never 0 (an
 * empty slot): a key's head (the response namespace, the schema's and the document's hashes) is
 * the same for every key of an operation, and hashing it cost more than the rest of the admission.
 * Two keys alike in their last 48 code units and length share a digest: the second is taken for
 * asked again, and stored (harmless).
 */
function digestOf(key: string): number {
  let hash = 0x811c9dc5 ^ key.length;
  for (let i = Math.max(0, key.length - DIGEST_TAIL); i < key.length; i++)
    hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return hash >>> 0 || 1;
}

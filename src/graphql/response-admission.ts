/**
 * Which misses the response layer stores (./response-cache): an operation whose stored responses
 * are never read (a page per product id, each asked once: "one-hit wonders") pays for its walk and
 * its write on every miss and gains nothing from them. Once `limit` of an operation's responses
 * were stored in a row and none of its responses was read meanwhile, only 1 in `limit` of its
 * misses is stored (the others are answered to the request that executed them and not stored:
 * `not_admitted`), until a response of it is read again (a hit, a stale hit, or a request that
 * joined an execution): then every miss is stored again. Varnish's hit-for-miss, per operation.
 *
 * Only a miss no other request of this process waits on can be left unstored (the engine asks
 * this only then): one with waiters is a read already, and is stored and shared as any other, so
 * a result is never handed to another request without being walked (its tags, its own copy).
 * The stored sample keeps finding out whether the operation's responses are asked again: a page
 * that turns popular is stored within `limit` misses of its operation on each replica.
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
  /** Misses not stored since then (every limit-th of them is stored). */
  skipped: number;
}

export class Admission {
  readonly #limit: number;
  readonly #operations = new WeakMap<StaticPolicy, Reads>();

  /** `limit`: see the module; 0 stores every response. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Whether to store the result of this miss of the operation, no request waiting on it (counts the misses it skips). */
  admits(operation: StaticPolicy): boolean {
    if (this.#limit === 0) return true;
    const reads = this.#operations.get(operation);
    if (reads === undefined || reads.unread < this.#limit) return true;
    if (++reads.skipped < this.#limit) return false;
    reads.skipped = 0;
    return true;
  }

  /** A response of the operation was stored. */
  stored(operation: StaticPolicy): void {
    if (this.#limit === 0) return;
    const reads = this.#operations.get(operation);
    if (reads === undefined) this.#operations.set(operation, { unread: 1, skipped: 0 });
    else reads.unread++;
  }

  /** A response of the operation was read: every miss of it is stored again. */
  read(operation: StaticPolicy): void {
    const reads = this.#operations.get(operation);
    if (reads !== undefined && reads.unread > 0) {
      reads.unread = 0;
      reads.skipped = 0;
    }
  }
}

/**
 * Which misses the response layer stores (./response-cache): an operation whose stored responses
 * are never read (a page per product id, each asked once: "one-hit wonders") pays for its walk and
 * its write on every miss and gains nothing from them. Once `limit` of an operation's responses
 * were stored in a row and none of its responses was read meanwhile, only 1 in `limit` of its
 * misses is stored (the rest are executed, shared with the requests waiting on them, and not
 * stored: `not_admitted`), until a response of it is read again (a hit, a stale hit, or a request
 * that joined an execution): then every miss is stored again. Varnish's hit-for-miss, per
 * operation. The stored sample keeps finding out whether the operation's responses are asked
 * again: a page that turns popular is stored within `limit` misses of its operation, and a
 * concurrent identical request (it joins the execution) ends the skipping at once.
 *
 * Kept per operation (its static policy, one object per parsed document and operation name while
 * the server keeps the document: Apollo's and Yoga's document caches), in a WeakMap: an operation
 * the server forgot takes its counts with it.
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

  /** Whether to store the result of this miss of the operation (counted as stored when true). */
  admit(operation: StaticPolicy): boolean {
    if (this.#limit === 0) return true;
    let reads = this.#operations.get(operation);
    if (reads === undefined) this.#operations.set(operation, (reads = { unread: 0, skipped: 0 }));
    if (reads.unread < this.#limit) {
      reads.unread++;
      return true;
    }
    if (++reads.skipped < this.#limit) return false;
    reads.skipped = 0;
    return true;
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

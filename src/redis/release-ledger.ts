/**
 * Lock releases that may not have reached the Redis that holds the lock, sent again.
 *
 * A release (or a fenced write, which releases) can be lost two ways: it failed (the client was
 * not connected, as during a Sentinel failover or a restart; it timed out), or it succeeded on a
 * master that was demoted right after and lost it (replication is asynchronous: the lock reached
 * the promoted replica, its release did not). Either way the lock outlives its fill, and every
 * replica's miss of that key waits on it, up to lockWaitTimeout, until it expires (lockTtl).
 *
 * So the fill lock records, per token, until when its locks could still exist (the last acquire
 * plus its ttl), and this ledger keeps the releases of the last lockTtl: one that could not be sent
 * (client not connected) is sent once the client is connected again (checked every RETRY_MS);
 * all of them are sent again when the client reconnects (the guard tells: guard.ts). Bounded: an entry is dropped once its locks would have expired
 * anyway, and at most MAX_KEYS keys are kept. Safe: the release script deletes a lock only while
 * it still holds the release's token (compare-and-delete), so a lock taken since by anyone else,
 * or by this process under another token, is untouched; the ledger only holds keys whose fill
 * is over (released or written), never a lock still in use.
 */

/** Milliseconds between two attempts of a release that failed. */
export const RETRY_MS = 100;
/** Keys the ledger keeps at most (the oldest go first): a bound on memory under heavy load. */
export const MAX_KEYS = 10_000;

export interface Release {
  readonly token: string;
  readonly keys: readonly string[];
  /** Epoch ms after which the locks are gone by themselves (their lockTtl). */
  readonly until: number;
  /** Not known to have landed: sent again every RETRY_MS. */
  failed: boolean;
}

export class ReleaseLedger {
  /** Per token, until when its locks could exist (epoch ms): the last acquire plus its ttl. */
  readonly #tokens = new Map<string, number>();
  #releases: Release[] = [];
  #keys = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #send: (keys: readonly string[], token: string) => Promise<unknown>;
  /** Whether the client is connected: failed releases wait for it (sent then, not into a dead socket). */
  readonly #ready: () => boolean;
  readonly #now: () => number;

  constructor(
    send: (keys: readonly string[], token: string) => Promise<unknown>,
    ready: () => boolean,
    now: () => number = Date.now,
  ) {
    this.#send = send;
    this.#ready = ready;
    this.#now = now;
  }

  /** Locks were tried under `token` for `ttlMs`. */
  acquired(token: string, ttlMs: number): void {
    const now = this.#now();
    this.#prune(now);
    const tokens = this.#tokens;
    // Re-inserted at the end: the map stays in order of expiry (one lockTtl per cache), pruned from the front.
    tokens.delete(token);
    tokens.set(token, now + ttlMs);
  }

  /**
   * A release of `keys` under `token` is being sent (a release, or a fenced write). Returns the
   * entry to mark with `failed` once the outcome is known, or undefined when its locks cannot
   * outlive the call (a token this store never locked with, or expired).
   */
  sent(keys: readonly string[], token: string): Release | undefined {
    const until = this.#tokens.get(token);
    const now = this.#now();
    if (until === undefined || until <= now || keys.length === 0) return undefined;
    const release: Release = { token, keys, until, failed: false };
    this.#releases.push(release);
    this.#keys += keys.length;
    this.#prune(now);
    return release;
  }

  /**
   * The release was not sent: the client was not connected. Sent again once it is (checked every
   * RETRY_MS), until it lands or its locks expired. (A release that timed out or met an error reply
   * is not: a Cluster master that is down would get a stream of them.)
   */
  failed(release: Release | undefined): void {
    if (release === undefined) return;
    release.failed = true;
    this.#arm();
  }

  /** The client reconnected: every release of the last lockTtl may have been lost with the connection or the old master. */
  reconnected(): void {
    this.#resend(false);
  }

  /** Releases kept (for tests and health checks): how many, and how many are still failing. */
  get pending(): { readonly releases: number; readonly failed: number } {
    this.#prune(this.#now());
    let failed = 0;
    for (const release of this.#releases) if (release.failed) failed++;
    return { releases: this.#releases.length, failed };
  }

  #arm(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#ready()) this.#resend(true);
      else if (this.pending.failed > 0) this.#arm();
    }, RETRY_MS);
    // A retry must not keep a process alive: the lock expires by itself anyway.
    this.#timer.unref();
  }

  #resend(failedOnly: boolean): void {
    const now = this.#now();
    this.#prune(now);
    for (const release of this.#releases) {
      if ((failedOnly && !release.failed) || release.until <= now) continue;
      this.#send(release.keys, release.token).then(
        () => {
          release.failed = false;
        },
        () => {
          // Not connected again: wait for it. Sent and failed (timed out, an error reply): given up.
          if (this.#ready()) release.failed = false;
          else this.failed(release);
        },
      );
    }
  }

  #prune(now: number): void {
    const releases = this.#releases;
    let drop = 0;
    let keys = this.#keys;
    // Oldest first; an entry past its locks' expiry, or beyond the cap, goes.
    while (drop < releases.length && (releases[drop]!.until <= now || keys > MAX_KEYS))
      keys -= releases[drop++]!.keys.length;
    if (drop > 0) {
      this.#releases = releases.slice(drop);
      this.#keys = keys;
    }
    for (const [token, until] of this.#tokens) {
      if (until > now) break;
      this.#tokens.delete(token);
    }
  }
}

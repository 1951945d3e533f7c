/**
 * The contract between the registry and a place that keeps entries.
 *
 * The registry never serializes: a store decides how an entry is kept (the memory store keeps
 * the object itself; the Redis store encodes it with a codec). Every method may fail; the
 * registry counts the failure and degrades to computing the value, so a store should throw
 * (or reject) rather than hang: a store talking to a network bounds its own latency.
 */
import type { Entry } from './freshness';

export interface StoreWrite {
  readonly key: string;
  readonly entry: Entry;
  /** Milliseconds the store should keep the entry (end of grace). `Infinity`: no expiry. */
  readonly ttl: number;
  /**
   * For a fill written without the fill lock: the registry clock's time when the fill started.
   * A store that remembers recent invalidations (Redis) drops the write when the key was
   * invalidated at or after this time: the value may have been computed from data older than
   * the invalidation. Absent for writes that stand on their own (prime).
   */
  readonly since?: number;
}

/** How a deletion is made. */
export interface DeleteOptions {
  /**
   * The registry clock's time of the invalidation. A store that remembers invalidations (Redis:
   * a short-lived marker per key) refuses the unlocked writes of fills started before it.
   */
  readonly at?: number;
}

/** Per-key outcome of trying a fill lock. */
export interface LockAttempt {
  /** This caller now holds the key's fill lock and should fill it. */
  readonly won: boolean;
  /** The entry as read right after trying the lock (the re-check), or undefined. */
  readonly entry: Entry | undefined;
  /** Not won: the token of the lock found holding the key, when the lock tells (see LockWatch.take). */
  readonly holder?: string;
}

/** What FillLock.readOrAcquire found: per key its entry and, for a key whose lock it tried, that attempt. */
export interface ReadAttempts {
  /** Aligned with the keys, as getMany returns them. */
  readonly entries: readonly (Entry | undefined)[];
  /**
   * Aligned with the keys: the lock attempt made for a key found missing (as acquire returns it,
   * under the caller's token; `entry` undefined), or undefined where none was made (the key was
   * found, is not lockable, was expected present, or its part of the call failed).
   */
  readonly attempts: readonly (LockAttempt | undefined)[];
  /**
   * The watch opened, before the call, on the keys whose lock was tried (a held one registered this
   * process as its waiter): the caller waits with it and closes it. Undefined: none was tried, or
   * the lock has no watch.
   */
  readonly watch: LockWatch | undefined;
  /**
   * Asked with `clock` and a lock tried: the store's tag clock (Store.tagClock), read in the same
   * round trip; NaN when that read failed. Undefined: not asked, or no lock tried (a warm read).
   */
  readonly clock?: number;
}

/**
 * A fill lock shared by every process using the same store (Redis: SET NX PX + token).
 * A store without one (memory) relies on the registry's in-process single-flight alone.
 */
export interface FillLock {
  /**
   * Tries the locks of all `keys` in one round trip and re-reads their entries. `refreshing[i]`:
   * key i is a background refresh, which does not wait on another process's lock when an entry is
   * there (it keeps serving it): a lock that tells its holders who waits registers such a key's
   * caller only when it finds no entry, so the holder's write sends it nothing (redisStore).
   */
  acquire(
    keys: readonly string[],
    token: string,
    ttlMs: number,
    refreshing?: readonly boolean[],
  ): Promise<LockAttempt[]>;
  /**
   * Fenced write: writes each entry only if `token` still holds its key's lock, then releases
   * the lock. Returns per write whether it landed. A filler whose lock expired, or whose lock
   * was removed by an invalidation, writes nothing.
   */
  writeAndRelease(writes: readonly StoreWrite[], token: string): Promise<boolean[]>;
  /**
   * Optional, for a lock that gathers fenced writes before sending them (redisStore: the writes of
   * one event-loop turn go in one call): settles once the writes issued so far are handed to the
   * connection, or undefined when none wait. The registry answers a fill's callers after it, so
   * whatever they do next (a read, a delete, closing the client) comes after the write. Never rejects.
   */
  sent?(): Promise<void> | undefined;
  /**
   * Optional: the pipeline's read (getMany) that also tries the lock of keys it finds missing, in
   * the same round trip, so a cold key's filler starts after one call and its waiters are
   * registered at once. `lockable[i]`: key i takes the lock. The store may try only the keys it
   * expects missing (redisStore: a key it read present and not yet expired is read as getMany
   * does, without a script); a key not tried goes through acquire as usual. Rejects as getMany
   * does (locks a late call took are the store's to release, its watch is closed). `clock`: a
   * late-tagged fill may follow, so the store also reads its tag clock (ReadAttempts.clock) when it
   * tries a lock; a store may ignore it (the registry then reads the clock before the fill).
   */
  readOrAcquire?(
    keys: readonly string[],
    lockable: readonly boolean[],
    token: string,
    ttlMs: number,
    clock?: boolean,
  ): Promise<ReadAttempts>;
  /** Releases locks still held by `token` (compare-and-delete); others' locks are untouched. */
  release(keys: readonly string[], token: string): Promise<void>;
  /**
   * Optional: hears when the holders of `keys`' locks write or release them, so a waiter tries
   * again at once instead of sleeping out its poll backoff. Opened before the first lock attempt
   * (news arriving during an attempt is kept for the next wait); closed when the waiting is over.
   */
  watch?(keys: readonly string[]): LockWatch;
}

/** News of the locks a process waits on (see FillLock.watch). */
export interface LockWatch {
  /**
   * Settles when `sleep` (the poll backoff) settles, or earlier when a watched key was announced
   * since the previous wait; never rejects. Polling stays the fallback: a lost announcement costs
   * the sleep, never an answer.
   */
  wait(sleep: Promise<void>): Promise<void>;
  /**
   * The entry a holder's announcement carried for `key`, once, if it was written under the lock
   * `holder` (the one the caller's last attempt found holding the key: so written after that
   * attempt): the caller answers from it instead of re-reading the key. Undefined: none came, a
   * late one of another lock, or the store announces keys only: re-read.
   */
  take?(key: string, holder: string): Entry | undefined;
  /** Optional: watches `keys` too (opened before their first lock attempt, as at watch()). */
  add?(keys: readonly string[]): void;
  close(): void;
}

/** How a store reports what it dropped without failing the call. */
export interface StoreReporter {
  /** A value could not be encoded: it was returned to its callers but not stored. */
  encodeError(key: string, error: unknown): void;
  /** A stored entry could not be decoded (garbage, foreign format, old version): read as a miss. */
  decodeError(key: string, error: unknown): void;
  /**
   * Another process invalidated `keys`, `tags`, or everything (`all`), as far as this store can
   * tell (tieredStore hears it over pub/sub, milliseconds after the fact). A registry that
   * implements it abandons its fills of those keys and tags in flight, as it does for its own
   * invalidations, so a caller arriving after the news does not join a fill that started before it.
   */
  remoteInvalidation?(keys: readonly string[], tags: readonly string[], all: boolean): void;
}

/** @internal A caller's slot for one key (see Store.readSlot): the key's stored form, and what the store left in it. */
export interface StoreSlot {
  readonly stored: string;
  entry: Entry | undefined;
  /** The store and its state (clears, invalidations, recency: memory.ts) when it was filled. */
  stamp: number;
}

export interface Store {
  /** Short name for logs and metrics: "memory", "redis", "tiered". */
  readonly name: string;
  /**
   * Synchronous read, for in-process stores. When present, a hit is answered without a tick
   * and without allocating a promise chain; the registry still batches misses.
   */
  getSync?(key: string): Entry | undefined;
  /**
   * @internal getSync for the registry, which judges the entry's servedUntil itself with its one
   * clock read: a store whose getSync reads the clock (tieredStore, for l1Until) skips that here.
   */
  peekSync?(key: string): Entry | undefined;
  /**
   * @internal getSync through a slot the caller keeps for one key (a @cached field's key, per
   * parent): while the key's entry has not changed since the slot's last read, the entry read
   * then, with no lookup. A store that has it empties a key's slot when the key changes or leaves.
   */
  readSlot?(slot: StoreSlot): Entry | undefined;
  /**
   * `false` when getSync sees only part of the store (tieredStore: its in-process L1), so a getSync
   * miss must still be read with getMany before anything is filled. Default true: a getSync miss
   * is a miss of the store.
   */
  readonly getSyncComplete?: boolean;
  /**
   * @internal true when delete, invalidateTags and clear take effect before their promise (the
   * memory store): no read can run between an invalidation's call and its landing, so the
   * registry's sweep of the fills started meanwhile (Invalidation) is not needed.
   */
  readonly invalidatesAtOnce?: boolean;
  /** Reads many keys at once (Redis: one MGET). Result is aligned with `keys`. */
  getMany(keys: readonly string[]): Promise<(Entry | undefined)[]>;
  /** Writes many entries at once (Redis: one pipeline with PX expiry). */
  setMany(writes: readonly StoreWrite[]): Promise<void>;
  /**
   * @internal Optional, for a store that gathers setMany calls before sending them (redisStore:
   * those of one event-loop turn go in one pipeline): settles once the writes issued so far are
   * handed to the connection, or undefined when none wait (as FillLock.sent). Never rejects.
   */
  writesSent?(): Promise<void> | undefined;
  /**
   * @internal Whether a write of `entry` under `key` would be kept, not skipped as larger than the
   * store takes (memoryStore's maxEntrySize, redisStore's maxValueBytes). Asked before writing a
   * value computed to be stored whole (a response): one it would skip is served, not written, and
   * reported so (LateTagged.refused). A store that encodes may keep the payload for the write.
   */
  keeps?(key: string, entry: Entry): boolean;
  /** Removes keys and, where the store has fill locks, their locks too (fences older fills). */
  delete(keys: readonly string[], options?: DeleteOptions): Promise<void>;
  /** Removes every entry this store owns (Redis: only under its prefix). */
  clear(): Promise<void>;
  readonly lock?: FillLock;
  /**
   * Makes every entry carrying one of `tags` a miss, everywhere this store is shared. A store
   * without it cannot hold tagged entries' invalidation (the registry then rejects tags).
   */
  invalidateTags?(tags: readonly string[]): Promise<void>;
  /**
   * Stores shared between processes version their tags: invalidateTags bumps them, and the
   * registry reads the versions of a fill's tags before the fill and records them in the entry
   * (Entry.tagVersions); an entry whose versions are no longer current is a miss. A store that
   * enforces tags itself (the memory store deletes the entries) does not have this.
   */
  tagVersions?(tags: readonly string[]): Promise<number[]>;
  /**
   * Optional, with tagVersionsSince, on a tag-versioned store: the store's tag clock, a number that
   * every invalidateTags made after this call settles (by any process) gives its tags above it
   * (redisStore: a fleet-wide clock, see its tag-clock.ts). The registry reads it before a fill
   * whose tags are known only when it ends (LateTagged), whose versions cannot be read before it.
   */
  tagClock?(): Promise<number>;
  /**
   * tagVersions, except that a tag invalidated after the tag clock read `since` (a tagClock value)
   * reads NaN: a late-tagged value computed while one of its tags was invalidated is then served
   * but not stored.
   */
  tagVersionsSince?(tags: readonly string[], since: number): Promise<number[]>;
  /** Called once by the registry that owns the store. */
  bind?(reporter: StoreReporter): void;
  close?(): Promise<void>;
}

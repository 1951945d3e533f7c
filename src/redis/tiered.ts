/**
 * The tiered store: an in-process L1 (a memoryStore) in front of the shared Redis L2, kept coherent
 * across replicas over Redis pub/sub.
 *
 * An L1 hit is a map lookup: no round trip, no serialization, no promise (getSync). What the L1
 * holds is only ever a copy of what L2 held or confirmed, and for at most `l1Ttl`:
 * - every write, delete, tag invalidation and clear goes to L2 first, then is PUBLISHed on the
 *   channel; every other replica drops its L1 copies of those keys (or tags, or everything);
 * - a copy enters L1 only if nothing touching its key or tags happened while it was read (a
 *   message from another replica, or a write/invalidation issued here), and, for a tagged value,
 *   only after its tag versions were found current in L2. Without that, an L2 read racing an
 *   invalidation could put back the very value the invalidation removed, and the registry does not
 *   check tags on the synchronous path;
 * - a replica that is not subscribed (subscriber connection closed, reconnecting) cannot hear the
 *   others, so it empties its L1 when it loses the subscription and again when it has it back, and
 *   in between keeps copies for at most l1Ttl. A failed PUBLISH empties the publisher's L1 too: the
 *   failure says its connection to Redis is in trouble, so it is likely deaf as well.
 *
 * Staleness, in one line: an L1 copy is dropped within the pub/sub delivery time of a change made on
 * any replica, and is never older than l1Ttl whatever happens to pub/sub.
 *
 * This file: options and the store facade (reads, writes, lock). How copies are made and dropped:
 * tiered-l1.ts; publishing changes and applying the others': tiered-replicas.ts; the messages, the
 * subscription and change windows: tiered-bus.ts.
 */
// (A value import first: the header above stays out of the published .d.ts, as it always has.)
import { StorePartialError, invalidOption } from '../core/errors';
import type { Cluster, Redis } from 'ioredis';
import type { Clock, Entry } from '../core/freshness';
import { MemoryStore, memoryStore } from '../core/memory';
import { checkDuration, checkKnownKeys, givenOr, optionNames } from '../core/options';
import type { RedisStore } from './redis-store';
import { checkSubscriber } from './announcements';
import { L1Copies, type Candidate } from './tiered-l1';
import { Replicas } from './tiered-replicas';
import type { DeleteOptions, FillLock, LockAttempt, Store, StoreReporter, StoreWrite } from '../core/store';
import { readOrAcquire } from './tiered-lock';

export interface TieredStoreOptions {
  /** The shared tier: a redisStore. Its client also publishes the invalidation messages. */
  l2: RedisStore;
  /**
   * A connection of its own for SUBSCRIBE (a subscribed connection can run nothing else): pass
   * `client.duplicate()`; for a Cluster `client.duplicate([], { shardedSubscribers: true })` (the
   * messages use Redis 7 sharded pub/sub). The same connection can be the L2's `subscriber` (fill
   * announcements). Owned by the user: the store subscribes and unsubscribes, never quits it.
   */
  subscriber: Redis | Cluster;
  /** The in-process tier. Default `memoryStore()` (10000 entries, LRU). */
  l1?: MemoryStore;
  /** Longest an L1 copy is kept, in ms, whether or not pub/sub works: > 0, at most 1e15. Default 5000. */
  l1Ttl?: number;
  /** Pub/sub channel shared by the replicas of one cache. Default: the L2 prefix + "invalidate". */
  channel?: string;
  /**
   * Largest invalidation message, in bytes: a change naming more keys or tags is sent as several
   * messages (pub/sub delivers every message to every subscribed replica). Default 32768.
   */
  maxMessageBytes?: number;
  /** Time source for l1Ttl and for freshness checks of L1 copies: pass the registry's clock. Default Date.now. */
  clock?: Pick<Clock, 'now'>;
}

export interface TieredStats {
  /** Whether this replica currently hears the others (SUBSCRIBE confirmed since the last drop). */
  readonly subscribed: boolean;
  /** Entries in L1 (some may be past l1Ttl, dropped when next read). */
  readonly l1Size: number;
  /** Messages this replica published, and PUBLISH calls that failed. */
  readonly published: number;
  readonly publishFailures: number;
  /** Messages from other replicas applied (this replica's own are ignored, not counted). */
  readonly received: number;
  /** Times the whole L1 was emptied: subscription lost or regained, publish failed, clear, unreadable message. */
  readonly l1Clears: number;
  /** L2 entries copied into L1, and copies refused (key or tags changed meanwhile, tag versions not current). */
  readonly promoted: number;
  readonly refused: number;
}

export interface TieredStore extends Store {
  readonly name: 'tiered';
  readonly lock: FillLock;
  readonly getSyncComplete: false;
  getSync(key: string): Entry | undefined;
  tagVersions(tags: readonly string[]): Promise<number[]>;
  tagVersionsSince(tags: readonly string[], since: number): Promise<number[]>;
  tagClock(): Promise<number>;
  invalidateTags(tags: readonly string[]): Promise<void>;
  bind(reporter: StoreReporter): void;
  /** Unsubscribes and stops listening; leaves both connections open (they are the user's). */
  close(): Promise<void>;
  /** Whether this replica currently hears the others. */
  readonly subscribed: boolean;
  stats(): TieredStats;
}

export const TIERED_DEFAULT_L1_TTL = 5000;
export const TIERED_DEFAULT_MAX_MESSAGE_BYTES = 32_768;
/** Room for the envelope and one ordinary key. */
const MIN_MESSAGE_BYTES = 256;

const TIERED_STORE_OPTIONS = optionNames<TieredStoreOptions>({
  l2: true,
  subscriber: true,
  l1: true,
  l1Ttl: true,
  channel: true,
  maxMessageBytes: true,
  clock: true,
});

export function tieredStore(options: TieredStoreOptions): TieredStore {
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, 'an object with "l2" and "subscriber"');
  checkKnownKeys('tieredStore()', options, TIERED_STORE_OPTIONS);
  const { l2, subscriber, l1Ttl = TIERED_DEFAULT_L1_TTL, clock } = options;
  const l2Like = l2 as Partial<RedisStore> | null | undefined;
  if (
    l2Like === null ||
    typeof l2Like !== 'object' ||
    typeof l2Like.publish !== 'function' ||
    typeof l2Like.tagVersions !== 'function' ||
    l2Like.lock === undefined
  ) {
    throw invalidOption('l2', l2, 'a redisStore(...)');
  }
  checkSubscriber('subscriber', subscriber, l2.client);
  const l1 = options.l1 === undefined ? memoryStore() : options.l1; // null is refused below
  if (!(l1 instanceof MemoryStore)) throw invalidOption('l1', l1, 'a memoryStore(...)');
  checkDuration('l1Ttl', l1Ttl, false);
  const channel = givenOr(options.channel, `${l2.prefix}invalidate`);
  if (typeof channel !== 'string' || channel.length === 0)
    throw invalidOption('channel', channel, 'a non-empty string');
  const { maxMessageBytes = TIERED_DEFAULT_MAX_MESSAGE_BYTES } = options;
  if (!Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < MIN_MESSAGE_BYTES) {
    throw invalidOption('maxMessageBytes', maxMessageBytes, `an integer number of bytes >= ${MIN_MESSAGE_BYTES}`);
  }
  if (clock !== undefined && typeof clock?.now !== 'function')
    throw invalidOption('clock', clock, 'an object with a now() method');
  const now = clock === undefined ? Date.now : () => clock.now();
  return new TieredStoreImpl(
    new L1Copies(l1, (tags) => l2.tagVersions(tags), l1Ttl, now),
    l2,
    subscriber,
    channel,
    maxMessageBytes,
    now,
  );
}

class TieredStoreImpl implements TieredStore {
  readonly name = 'tiered' as const;
  readonly getSyncComplete = false as const;
  readonly lock: FillLock;
  readonly #l1: L1Copies;
  readonly #l2: RedisStore;
  readonly #replicas: Replicas;
  readonly #now: () => number;
  #closed = false;

  constructor(
    l1: L1Copies,
    l2: RedisStore,
    subscriber: Redis | Cluster,
    channel: string,
    maxMessageBytes: number,
    now: () => number,
  ) {
    this.#l1 = l1;
    this.#l2 = l2;
    this.#now = now;
    const inner = l2.lock;
    this.lock = {
      acquire: (keys, token, ttlMs, refreshing) => this.#acquire(inner, keys, token, ttlMs, refreshing),
      writeAndRelease: (writes, token) => this.#writeAndRelease(inner, writes, token),
      release: (keys, token) => inner.release(keys, token),
      // The pipeline's read that also tries the locks of keys missing from both tiers: one L2 call.
      readOrAcquire:
        inner.readOrAcquire === undefined
          ? undefined
          : (keys, lockable, token, ttlMs, clock) =>
              readOrAcquire(this.#l1, inner, keys, lockable, token, ttlMs, this.#now(), clock === true),
      // The L2's fill announcements, when it has a subscriber: waiters are woken through the tier.
      watch: inner.watch,
    };
    this.#replicas = new Replicas(l1, l2, subscriber, channel, maxMessageBytes);
  }

  get subscribed(): boolean {
    return this.#replicas.subscribed;
  }

  stats(): TieredStats {
    const l1 = this.#l1;
    const replicas = this.#replicas;
    return {
      subscribed: replicas.subscribed,
      l1Size: l1.size,
      published: replicas.published,
      publishFailures: replicas.publishFailures,
      received: replicas.received,
      l1Clears: l1.clears,
      promoted: l1.promoted,
      refused: l1.refused,
    };
  }

  bind(reporter: StoreReporter): void {
    this.#replicas.reporter = reporter;
    this.#l2.bind(reporter);
  }

  // ── reads ──────────────────────────────────────────────────────────────────────────────

  getSync(key: string): Entry | undefined {
    return this.#l1.getSync(key);
  }

  /** @internal Store: see L1Copies.peekSync. */
  peekSync(key: string): Entry | undefined {
    return this.#l1.peekSync(key);
  }

  /** Fresh L1 copies answer; the rest is one L2 read (MGET), whose hits are copied into L1. */
  async getMany(keys: readonly string[]): Promise<(Entry | undefined)[]> {
    const n = keys.length;
    const out = new Array<Entry | undefined>(n);
    const now = this.#now();
    const l1 = this.#l1;
    let missing: number[] | undefined;
    for (let i = 0; i < n; i++) {
      const copy = l1.fresh(keys[i]!, now);
      if (copy !== undefined) out[i] = copy;
      else (missing ??= []).push(i);
    }
    if (missing === undefined) return out;
    const asked = missing.length === n ? keys : missing.map((i) => keys[i]!);
    const window = l1.open(now);
    let found: (Entry | undefined)[];
    try {
      found = await this.#l2.getMany(asked);
    } catch (error) {
      l1.discard(window);
      if (!(error instanceof StorePartialError) || asked === keys) throw error;
      // Answered in part (a Cluster master down): that part and the failed positions, in the
      // caller's order (the L2 answered `asked`, the keys L1 did not have); nothing copied.
      const partial = error.partial as (Entry | undefined)[];
      for (let j = 0; j < asked.length; j++) out[missing[j]!] = partial[j];
      throw new StorePartialError(
        error.failure,
        out,
        error.message,
        error.failedAt?.map((j) => missing[j]!),
      );
    }
    const candidates: Candidate[] = [];
    let gone: string[] | undefined;
    for (let j = 0; j < asked.length; j++) {
      const entry = found[j];
      out[missing[j]!] = entry;
      if (entry !== undefined) candidates.push({ key: asked[j]!, entry });
      else (gone ??= []).push(asked[j]!);
    }
    if (gone !== undefined) l1.forget(window, gone);
    l1.promote(window, candidates);
    return out;
  }

  tagVersions(tags: readonly string[]): Promise<number[]> {
    return this.#l2.tagVersions(tags);
  }

  /** The L2's tag clock (tag-clock.ts): this replica hears others' invalidations late, Redis does not. */
  tagVersionsSince(tags: readonly string[], since: number): Promise<number[]> {
    return this.#l2.tagVersionsSince(tags, since);
  }

  tagClock(): Promise<number> {
    return this.#l2.tagClock();
  }

  // ── writes and invalidations: L2 first, then L1, then the other replicas ─────────────────

  /** What Redis keeps (an entry L1 would not hold is still read from Redis). */
  keeps(key: string, entry: Entry): boolean {
    return this.#l2.keeps?.(key, entry) ?? true;
  }

  async setMany(writes: readonly StoreWrite[]): Promise<void> {
    if (writes.length === 0) return;
    const keys = writes.map((write) => write.key);
    const window = this.#l1.beforeWrite(keys);
    try {
      await this.#l2.setMany(writes);
    } catch (error) {
      this.#l1.discard(window);
      throw error;
    }
    this.#l1.promote(window, writes);
    await this.#replicas.publish({ op: 'set', keys });
  }

  /**
   * Deletes in L2, drops this replica's copies, tells the others. Dropped again once L2 has the
   * change: a read sent while the change was on its way (on a Cluster, a bump waits a round trip
   * for the tag clock first) may have copied what it replaces into L1, and its window was not open
   * when the first drop ran. The second drop also closes the windows of reads still in flight.
   */
  async delete(keys: readonly string[], options?: DeleteOptions): Promise<void> {
    if (keys.length === 0) return;
    this.#l1.dropKeys(keys);
    await this.#l2.delete(keys, options);
    this.#l1.dropKeys(keys);
    await this.#replicas.publish({ op: 'delete', keys });
  }

  /** Bumps the tags in L2, drops this replica's tagged copies (before and after: see delete), tells the others. */
  async invalidateTags(tags: readonly string[]): Promise<void> {
    if (tags.length === 0) return;
    this.#l1.dropTags(tags);
    try {
      await this.#l2.invalidateTags(tags);
    } catch (error) {
      // Part taken (a Cluster master down): the other replicas drop their copies of what was bumped
      // now (the registry sends only the failed part again), then the failure is told.
      if (error instanceof StorePartialError) {
        this.#l1.dropTags(tags); // what a read copied from L2 meanwhile, as after a bump taken whole
        await this.#replicas.publish({ op: 'tags', tags }).catch(() => {});
      }
      throw error;
    }
    this.#l1.dropTags(tags);
    await this.#replicas.publish({ op: 'tags', tags });
  }

  async clear(): Promise<void> {
    this.#l1.dropAll();
    try {
      await this.#l2.clear();
    } finally {
      // A read issued while the SCAN ran may have copied a value the UNLINK then removed.
      this.#l1.dropAll();
    }
    await this.#replicas.publish({ op: 'clear' });
  }

  async #acquire(
    inner: FillLock,
    keys: readonly string[],
    token: string,
    ttlMs: number,
    refreshing: readonly boolean[] | undefined,
  ): Promise<LockAttempt[]> {
    const window = this.#l1.open(this.#now());
    let attempts: LockAttempt[];
    try {
      attempts = await inner.acquire(keys, token, ttlMs, refreshing);
    } catch (error) {
      this.#l1.discard(window);
      throw error;
    }
    // The re-check read is an L2 read like any other: what it found may be copied into L1.
    const candidates: Candidate[] = [];
    for (let i = 0; i < attempts.length; i++) {
      const entry = attempts[i]!.entry;
      if (entry !== undefined) candidates.push({ key: keys[i]!, entry });
    }
    this.#l1.promote(window, candidates);
    return attempts;
  }

  async #writeAndRelease(inner: FillLock, writes: readonly StoreWrite[], token: string): Promise<boolean[]> {
    if (writes.length === 0) return [];
    const window = this.#l1.beforeWrite(writes.map((write) => write.key));
    let landed: boolean[];
    try {
      landed = await inner.writeAndRelease(writes, token);
    } catch (error) {
      this.#l1.discard(window);
      throw error;
    }
    // A fenced-out write (lock expired, or removed by an invalidation) is not copied or announced.
    const written = writes.filter((_, i) => landed[i] === true);
    this.#l1.promote(window, written);
    if (written.length > 0) await this.#replicas.publish({ op: 'set', keys: written.map((write) => write.key) });
    return landed;
  }

  /** Unsubscribes (this store's channel, and the L2's fill announcements), leaves the connections open. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#l1.close();
    await Promise.all([this.#replicas.close(), this.#l2.close()]);
  }
}

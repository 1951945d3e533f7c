/**
 * The Redis store: entries shared by every replica, and the fill lock that lets one replica fill
 * a key while the others wait for its value.
 *
 * This file: the store's reads, writes, tags and clear. Its options, defaults and their checks:
 * redis-store-options.ts; the fill lock: redis-lock.ts; what both share (client, guard, key names,
 * slots, codec): link.ts.
 *
 * Round trips: a batch read is one MGET, a batch write one pipeline, a batch of lock attempts one
 * script call (in a Cluster: one per hash slot, sent in parallel). Freshness travels inside the
 * payload, so a hit is one read and nothing else.
 *
 * Faults: the cache must never be the outage. Every call is bounded by `commandTimeout`; a client
 * that lost its connection fails at once instead of queueing the command offline (one that was
 * never ready yet is waited for, up to `readyTimeout`: see guard.ts); a circuit breaker
 * stops paying timeouts while Redis is down. A failing call rejects with a coded HerdcacheError
 * and the registry computes the value instead. Bad data never throws: it reads as a miss.
 *
 * The client belongs to the user: this store never connects (except to start a `lazyConnect`
 * client, as ioredis would on its first command), quits or reconfigures it.
 *
 * Tags: invalidateTags bumps a version per tag (one script: a version above the last and the
 * server's clock, with an expiry); the registry reads the versions of a fill's tags before the
 * fill (one script call, which makes a missing version key) and records them in the entry; an
 * entry whose versions are not current is a miss. Nothing is scanned, nothing is deleted, no set of
 * keys per tag is kept: an invalidation is O(tags) and leaves two small expiring keys per tag. The
 * expiries, and why they cannot bring an invalidated value back: tags.ts; the tag clock, for tags
 * known only when a fill ends: tag-clock.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import type { BreakerState } from './breaker';
import { defineScripts, type LockScripts } from './scripts';
import { CallGuard, type NodeHealth } from './guard';
import { writeTimeout } from './call-timeout';
import { RedisTags } from './tag-clock';
import { INVALIDATED_SUFFIX, LOCK_SUFFIX, pick } from './keys';
import { clearPrefix } from './redis-clear';
import { RedisLink, type Raw } from './link';
import { RedisFillLock } from './redis-lock';
import { sendWrites } from './unlocked-writes';
import { TurnSets } from './turn-sets';
import { reconnectOnReadOnly } from './reconnect';
import { type Reconnecting, reconnectEarly } from './early-reconnect';
import { FillAnnouncements, type WakeStats } from './announcements';
import { resolveRedisStoreOptions, type RedisStoreOptions } from './redis-store-options';
import type { Entry } from '../core/freshness';
import type { DeleteOptions, FillLock, Store, StoreReporter, StoreWrite } from '../core/store';

export type { RedisStoreOptions } from './redis-store-options';

/** How waiting on other replicas' fill locks went (see RedisStoreOptions.subscriber). */
export interface RedisWaitStats extends WakeStats {
  /** Whether waits listen for announcements (false with `subscriber: false`: every wait polls). */
  readonly enabled: boolean;
  /** Whether the subscriber connection is the store's own (opened on first wait, closed by close()). */
  readonly owned: boolean;
}

export interface RedisStore extends Store {
  readonly name: 'redis';
  /** The fill lock, with the read that also tries the locks of keys found missing (read-or-lock.ts). */
  readonly lock: FillLock & Pick<Required<FillLock>, 'readOrAcquire'>;
  /** Where encode and decode errors go; until called, they are dropped. */
  bind(reporter: StoreReporter): void;
  /**
   * The circuit breaker's state, for health checks; "disabled" with `breaker: false`. In a Cluster
   * the worst of every master's breaker: "open" while one master is skipped (nodeHealth() says which).
   */
  readonly breakerState: BreakerState | 'disabled';
  /**
   * Cluster: per master ("host:port") seen so far, its own breaker's state and its failed calls
   * (a dead master is skipped alone and recovers alone). Empty for a standalone Redis.
   */
  nodeHealth(): Record<string, NodeHealth>;
  tagVersions(tags: readonly string[]): Promise<number[]>;
  tagVersionsSince(tags: readonly string[], since: number): Promise<number[]>;
  tagClock(): Promise<number>;
  invalidateTags(tags: readonly string[]): Promise<void>;
  /** The `prefix` option (without the client's own keyPrefix). */
  readonly prefix: string;
  /** The user's client, as given. */
  readonly client: Redis | Cluster;
  /** Writes not stored because their payload was larger than `maxValueBytes`. */
  readonly oversized: number;
  /**
   * PUBLISH on the store's client (SPUBLISH in a Cluster: sharded pub/sub), bounded like every
   * other call (timeout, breaker). Used by tieredStore to tell other replicas what changed;
   * resolves with the number of receivers.
   */
  publish(channel: string, message: string): Promise<number>;
  /** Waits on other replicas' fill locks: woken by announcements, or polled. */
  waitStats(): RedisWaitStats;
  /**
   * Stops listening for fill announcements: closes the store's own subscriber, or unsubscribes a
   * given one (left open, as the client is: both are the user's); removes its listeners on the client.
   */
  close(): Promise<void>;
}

/** The assembled result of a call whose replies say nothing beyond success. */
function none(): void {}

export function redisStore(options: RedisStoreOptions): RedisStore {
  const { client, commandTimeout, invalidationWindow, subscriber, ...rest } = resolveRedisStoreOptions(options);
  const link = new RedisLink(
    client,
    // A reply still arriving is waited for as long as the largest value may take to move (call-timeout.ts).
    new CallGuard(
      'redis',
      client,
      commandTimeout,
      rest.readyTimeout,
      rest.newBreaker,
      writeTimeout(commandTimeout, rest.maxValueBytes),
    ),
    rest.prefix,
    rest.codec,
    rest.maxKeyLength,
    rest.tagTtl,
    rest.maxValueBytes,
  );
  // A connection to a demoted master refuses every lock call: reconnect it (reconnect.ts).
  link.guard.onReplyError = reconnectOnReadOnly(client);
  return new RedisStoreImpl(
    link,
    defineScripts(client),
    invalidationWindow,
    subscriber === false ? undefined : new FillAnnouncements(subscriber, link),
    // A client waiting out a long reconnect delay is reconnected once Redis accepts (early-reconnect.ts).
    reconnectEarly(client as unknown as Reconnecting),
  );
}

/**
 * Every command of the store first sends the fenced writes the lock has gathered (redis-lock.ts):
 * a fill answered to its callers was written before anything they do next through this store (a
 * read, a delete, a clear), as when each write was sent at once.
 */
class RedisStoreImpl implements RedisStore {
  readonly name = 'redis' as const;
  readonly lock: RedisFillLock;
  readonly #link: RedisLink;
  readonly #scripts: LockScripts;
  readonly #invalidationWindow: string; // PX of an invalidation marker, as the scripts take it
  readonly #announcements: FillAnnouncements | undefined;
  readonly #stopEarlyReconnect: () => void;
  readonly #tags: RedisTags;
  readonly #sets = new TurnSets((writes) => this.#sendSets(writes)); // setMany's, for the turn

  constructor(
    link: RedisLink,
    scripts: LockScripts,
    invalidationWindow: number,
    announcements: FillAnnouncements | undefined,
    stopEarlyReconnect: () => void,
  ) {
    this.#stopEarlyReconnect = stopEarlyReconnect;
    this.#link = link;
    this.#scripts = scripts;
    this.#invalidationWindow = String(invalidationWindow);
    this.#announcements = announcements;
    this.#tags = new RedisTags(link, scripts);
    this.lock = new RedisFillLock(
      link,
      scripts,
      announcements,
      (keys) => this.getMany(keys),
      () => this.#tags.clock(),
      this.#sets.flush,
    );
  }

  waitStats(): RedisWaitStats {
    const announcements = this.#announcements;
    if (announcements === undefined)
      return { enabled: false, owned: false, listening: false, channels: 0, received: 0, woken: 0, polled: 0, deaf: 0 };
    return { enabled: true, owned: announcements.owned, ...announcements.stats() };
  }

  async close(): Promise<void> {
    // Writes gathered for this turn leave now: their callers' promises settle (bounded, as any call).
    this.lock.flushWrites();
    this.#announcements?.close();
    this.#stopEarlyReconnect();
    this.#link.guard.close();
  }

  get breakerState(): BreakerState | 'disabled' {
    return this.#link.guard.breakerState;
  }

  nodeHealth(): Record<string, NodeHealth> {
    return this.#link.guard.nodeHealth();
  }

  get prefix(): string {
    return this.#link.prefix;
  }

  get client(): Redis | Cluster {
    return this.#link.client;
  }

  get oversized(): number {
    return this.#link.oversized;
  }

  bind(reporter: StoreReporter): void {
    this.#link.reporter = reporter;
  }

  async getMany(keys: readonly string[]): Promise<(Entry | undefined)[]> {
    const n = keys.length;
    if (n === 0) return [];
    this.lock.flushWrites();
    const link = this.#link;
    const valueKeys = link.valueKeys(keys);
    const groups = link.slotGroups(valueKeys);
    const binary = link.binary;
    const client = link.client;
    const send = (indices: number[] | null): Promise<Raw[]> => {
      const batch = indices === null ? valueKeys : pick(valueKeys, indices);
      return binary ? client.mgetBuffer(batch) : client.mget(batch);
    };
    // A failed group's keys read as misses (in a StorePartialError with the others' entries).
    return link.call('getMany', valueKeys, groups, send, (replies) => {
      const out = new Array<Entry | undefined>(n);
      for (let g = 0; g < replies.length; g++) {
        const reply = replies[g];
        if (reply === undefined) continue;
        const indices = groups === null ? null : groups[g]!;
        for (let j = 0; j < reply.length; j++) {
          const i = indices === null ? j : indices[j]!;
          const raw = reply[j];
          out[i] = raw === null || raw === undefined ? undefined : link.decode(keys[i]!, raw);
        }
      }
      return out;
    });
  }

  keeps(key: string, entry: Entry): boolean {
    return this.#link.keeps(key, entry);
  }

  /**
   * Unlocked fills' writes (each with `since`) go with those of the other fills ending in this
   * turn, in one pipeline (turn-sets.ts; the fenced writes issued before them first); others (a
   * prime) leave now, after whatever was gathered before them.
   */
  setMany(writes: readonly StoreWrite[]): Promise<void> {
    if (writes.length === 0) return Promise.resolve();
    if (writes.every((write) => write.since !== undefined)) {
      this.lock.flushLocked();
      return this.#sets.add(writes);
    }
    this.lock.flushWrites();
    return this.#sendSets(writes);
  }

  /** @internal Store.writesSent: the unlocked writes gathered so far are on the connection. */
  writesSent(): Promise<void> | undefined {
    return this.#sets.sent();
  }

  /** Writes now (handed to the client before the first await): a turn's gathered setMany calls, or a prime. */
  #sendSets(writes: readonly StoreWrite[]): Promise<void> {
    return sendWrites(this.#link, writes);
  }

  async delete(keys: readonly string[], options?: DeleteOptions): Promise<void> {
    const n = keys.length;
    if (n === 0) return;
    this.lock.flushWrites();
    const link = this.#link;
    const valueKeys = link.valueKeys(keys);
    const groups = link.slotGroups(valueKeys);
    const scripts = this.#scripts;
    const at = options?.at;
    const client = link.client;
    link.presence.forget(keys);
    // The lock goes too: a fill that started before this invalidation then fails its fenced
    // write instead of storing a value computed from data older than the invalidation. The
    // marker does the same for fills without the lock (see WRITE_UNLESS_INVALIDATED).
    await link.call(
      'delete',
      valueKeys,
      groups,
      (indices) => {
        const count = indices === null ? n : indices.length;
        if (at === undefined || !Number.isFinite(at)) {
          const doomed = new Array<string>(2 * count);
          for (let j = 0; j < count; j++) {
            const key = valueKeys[indices === null ? j : indices[j]!]!;
            doomed[2 * j] = key;
            doomed[2 * j + 1] = key + LOCK_SUFFIX;
          }
          return client.unlink(doomed);
        }
        const triples = new Array<string>(3 * count);
        for (let j = 0; j < count; j++) {
          const key = valueKeys[indices === null ? j : indices[j]!]!;
          triples[3 * j] = key;
          triples[3 * j + 1] = key + LOCK_SUFFIX;
          triples[3 * j + 2] = key + INVALIDATED_SUFFIX;
        }
        return scripts.herdcacheInvalidate1(triples.length, triples, Math.floor(at), this.#invalidationWindow);
      },
      none,
    );
  }

  /** The current version of each tag (tag-clock.ts: one script call per slot); NaN where unknown. */
  async tagVersions(tags: readonly string[]): Promise<number[]> {
    if (tags.length === 0) return [];
    this.lock.flushWrites();
    return this.#tags.versions(tags);
  }

  /** As tagVersions, NaN for a tag invalidated after the tag clock read `since` (tag-clock.ts). */
  async tagVersionsSince(tags: readonly string[], since: number): Promise<number[]> {
    if (tags.length === 0) return [];
    this.lock.flushWrites();
    return this.#tags.versionsSince(tags, since);
  }

  async tagClock(): Promise<number> {
    this.lock.flushWrites();
    return this.#tags.clock();
  }

  /**
   * Bumps each tag's version and gives it the tag clock's next reading (tag-clock.ts). Every entry
   * recorded with an older version is a miss from the moment the script has run, on every replica,
   * whatever tier it is read from next (an in-process L1 is told separately: see tieredStore).
   */
  async invalidateTags(tags: readonly string[]): Promise<void> {
    if (tags.length === 0) return;
    this.lock.flushWrites();
    await this.#tags.invalidate(tags);
  }

  async publish(channel: string, message: string): Promise<number> {
    this.lock.flushWrites();
    const client = this.#link.client;
    // Sharded in a Cluster: a message goes to the channel's shard only, not to every node.
    const sharded = this.#link.cluster;
    return this.#link.guard.run('publish', () =>
      sharded ? (client.spublish(channel, message) as Promise<number>) : client.publish(channel, message),
    );
  }

  /**
   * Removes every key under this store's prefix: SCAN + UNLINK page by page, never KEYS (see
   * clearPrefix, redis-clear.ts).
   */
  async clear(): Promise<void> {
    this.lock.flushWrites();
    this.#link.presence.clear();
    await clearPrefix(this.#link);
  }
}

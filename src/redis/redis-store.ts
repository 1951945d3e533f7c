/**
 * The Redis store: entries shared by every replica, and the fill lock that lets one replica fill
 * a key while the others wait for its value.
 *
 * This file: options, and the store's reads, writes, tags and clear. The fill lock: redis-lock.ts;
 * what both share (client, guard, key names, slots, codec): link.ts.
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
 * Tags: invalidateTags bumps a version per tag (one script: INCR + PEXPIRE per tag); the registry
 * reads the versions of a fill's tags before the fill (one MGET) and records them in the entry; an
 * entry whose versions are not current is a miss. Nothing is scanned, nothing is deleted, no set of
 * keys per tag is kept: an invalidation is O(tags) and leaves one small expiring key per tag. The
 * expiries, and why they cannot bring an invalidated value back: tags.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import { HerdcacheError, invalidOption } from '../core/errors';
import { CircuitBreaker, type BreakerOptions, type BreakerState } from './breaker';
import { jsonCodec, type Codec } from './codec';
import { defineScripts, type LockScripts, type ScriptPipeline } from './scripts';
import { CallGuard, MAX_TIMEOUT, storeError, writeTimeout, type NodeHealth } from './guard';
import { readVersion, TAG_TTL_DEFAULT, versionKeyTtl } from './tags';
import { escapeGlob, groupPositions, INVALIDATED_SUFFIX, LOCK_SUFFIX, MIN_KEY_LENGTH, pick } from './keys';
import { MAX_DURATION, checkKnownKeys, checkNestedKeys, checkPositiveInteger, optionNames } from '../core/options';
import { RedisLink, type Raw } from './link';
import { RedisFillLock } from './redis-lock';
import { reconnectOnReadOnly } from './reconnect';
import { checkSubscriber, FillAnnouncements, type WakeStats } from './announcements';
import type { Entry } from '../core/freshness';
import type { DeleteOptions, FillLock, Store, StoreReporter, StoreWrite } from '../core/store';

export interface RedisStoreOptions {
  /** The user's ioredis client, `Redis` or `Cluster`. Connected and owned by the user. */
  client: Redis | Cluster;
  /** Prepended to every key; must not contain '{' or '}' (the keys' hash tag). Default "herdcache:". */
  prefix?: string;
  /** How entries become payloads. Default: JSON with a format version (`jsonCodec`). */
  codec?: Codec;
  /**
   * Milliseconds any store call may take before it rejects with E_STORE_TIMEOUT; a write is given
   * 1 ms more per 4 KiB of its payloads (an 8 MiB value: 2,048 ms more), and a call whose reply is
   * still arriving (a read of a large value) more slices of this, while bytes keep coming, up to
   * the budget of a `maxValueBytes` write (standalone Redis; see guard.ts). Default 250.
   */
  commandTimeout?: number;
  /**
   * A value whose payload (as the codec encodes it) is larger than this many bytes is not stored:
   * answered to its callers, counted in `oversized` and `encodeErrors`, reported to onStoreError
   * (E_VALUE_TOO_LARGE). So no read has to move more than this per key. Default 16 MiB.
   */
  maxValueBytes?: number;
  /**
   * Milliseconds calls wait for a client that has never been ready yet (still connecting right
   * after `new Redis(...)`) to become ready, counted from the first call that waits; then they
   * fail fast as for a client that lost its connection. 0: never wait. Default 2000.
   */
  readyTimeout?: number;
  /**
   * Milliseconds a key remembers its last `invalidate` (a small marker key), so a fill made without
   * the fill lock that started before the invalidation cannot cache its result afterwards. A fill
   * that runs longer than this after the invalidation is no longer fenced. Default 60000.
   */
  invalidationWindow?: number;
  /**
   * Circuit breaker, or `false` for none. Default `{ threshold: 5, coolDown: 250, maxCoolDown: 5000 }`:
   * open after 5 consecutive failures, one trial call after 250 ms, doubled after each failed
   * trial up to 5 s; closed at once when the client reconnects (see guard.ts).
   */
  breaker?: BreakerOptions | false;
  /** Keys longer than this many characters are stored under a sha256 of the key. Default 256. */
  maxKeyLength?: number;
  /**
   * Milliseconds. A tagged entry is kept at most this long (its PX is clamped to it), and a tag's
   * version key expires 2 × tagTtl after the tag's last invalidation, so a tag invalidated once
   * costs one key for a bounded time (tags.ts says why both). Default 7 days.
   */
  tagTtl?: number;
  /**
   * Pub/sub, to wake replicas waiting on a fill lock the moment the value lands instead of after
   * their poll backoff. Default: the store opens a connection of its own (`client.duplicate()`; a
   * Cluster: `client.duplicate([], { shardedSubscribers: true })`, Redis 7 sharded pub/sub) the
   * first time this process waits on another's lock, and closes it on close() (`cache.close()`)
   * or when `client` ends. A connection given here is used instead and stays the user's (the store
   * subscribes and unsubscribes, never quits it; the same one can serve a tieredStore). `false`:
   * no subscriber, waiters poll. See announcements.ts.
   */
  subscriber?: Redis | Cluster | false;
}

/** How waiting on other replicas' fill locks went (see RedisStoreOptions.subscriber). */
export interface RedisWaitStats extends WakeStats {
  /** Whether waits listen for announcements (false with `subscriber: false`: every wait polls). */
  readonly enabled: boolean;
  /** Whether the subscriber connection is the store's own (opened on first wait, closed by close()). */
  readonly owned: boolean;
}

export interface RedisStore extends Store {
  readonly name: 'redis';
  readonly lock: FillLock;
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
   * given one (left open, as the client is: both are the user's).
   */
  close(): Promise<void>;
}

const DEFAULTS = {
  prefix: 'herdcache:',
  commandTimeout: 250,
  readyTimeout: 2000,
  invalidationWindow: 60_000,
  threshold: 5,
  coolDown: 250,
  maxCoolDown: 5000,
  maxKeyLength: 256,
  tagTtl: TAG_TTL_DEFAULT,
  maxValueBytes: 16 * 1024 * 1024,
} as const;
/** SCAN page size hint for clear(): large enough to be quick, small enough not to block Redis. */
const SCAN_COUNT = 1000;

/** The assembled result of a call whose replies say nothing beyond success. */
function none(): void {}

const REDIS_STORE_OPTIONS = optionNames<RedisStoreOptions>({
  client: true,
  prefix: true,
  codec: true,
  commandTimeout: true,
  readyTimeout: true,
  invalidationWindow: true,
  breaker: true,
  maxKeyLength: true,
  tagTtl: true,
  subscriber: true,
  maxValueBytes: true,
});

const BREAKER_OPTIONS = optionNames<BreakerOptions>({ threshold: true, coolDown: true, maxCoolDown: true });

export function redisStore(options: RedisStoreOptions): RedisStore {
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, 'an object with a "client"');
  checkKnownKeys('redisStore()', options, REDIS_STORE_OPTIONS);
  const {
    client,
    prefix = DEFAULTS.prefix,
    codec = jsonCodec,
    commandTimeout = DEFAULTS.commandTimeout,
    readyTimeout = DEFAULTS.readyTimeout,
    invalidationWindow = DEFAULTS.invalidationWindow,
    breaker,
    maxKeyLength = DEFAULTS.maxKeyLength,
    tagTtl = DEFAULTS.tagTtl,
    subscriber,
    maxValueBytes = DEFAULTS.maxValueBytes,
  } = options;
  const candidate = client as Partial<Redis> | null | undefined;
  if (
    candidate === null ||
    typeof candidate !== 'object' ||
    typeof candidate.defineCommand !== 'function' ||
    typeof candidate.mget !== 'function' ||
    typeof candidate.status !== 'string'
  ) {
    throw invalidOption('client', client, 'an ioredis Redis or Cluster client');
  }
  if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
    throw invalidOption('prefix', prefix, "a string without '{' or '}' (they would change the keys' Cluster hash tag)");
  }
  if (
    codec === null ||
    typeof codec !== 'object' ||
    typeof codec.encode !== 'function' ||
    typeof codec.decode !== 'function'
  ) {
    throw invalidOption('codec', codec, 'an object with encode(entry) and decode(raw) functions');
  }
  if (typeof commandTimeout !== 'number' || !(commandTimeout > 0) || commandTimeout > MAX_TIMEOUT) {
    throw invalidOption('commandTimeout', commandTimeout, `a number of milliseconds in (0, ${MAX_TIMEOUT}]`);
  }
  if (typeof readyTimeout !== 'number' || !(readyTimeout >= 0) || readyTimeout > MAX_TIMEOUT) {
    throw invalidOption('readyTimeout', readyTimeout, `a number of milliseconds in [0, ${MAX_TIMEOUT}]`);
  }
  if (!Number.isSafeInteger(invalidationWindow) || invalidationWindow < 1 || invalidationWindow > MAX_DURATION) {
    throw invalidOption(
      'invalidationWindow',
      invalidationWindow,
      'a positive integer number of milliseconds, at most 1e15',
    );
  }
  if (!Number.isInteger(maxKeyLength) || maxKeyLength < MIN_KEY_LENGTH) {
    throw invalidOption(
      'maxKeyLength',
      maxKeyLength,
      `an integer >= ${MIN_KEY_LENGTH} (a hashed key is a readable head, '#' and 64 hex chars)`,
    );
  }
  if (!Number.isSafeInteger(tagTtl) || tagTtl < 1 || 2 * tagTtl > Number.MAX_SAFE_INTEGER) {
    throw invalidOption('tagTtl', tagTtl, 'a positive integer number of milliseconds');
  }
  checkPositiveInteger('maxValueBytes', maxValueBytes);
  if (subscriber !== undefined && subscriber !== false) checkSubscriber('subscriber', subscriber, client);
  let newBreaker: (() => CircuitBreaker) | undefined;
  if (breaker !== false) {
    if (breaker !== undefined && (breaker === null || typeof breaker !== 'object')) {
      throw invalidOption('breaker', breaker, 'false or an object { threshold?, coolDown?, maxCoolDown? }');
    }
    if (breaker !== undefined) checkNestedKeys('redisStore()', 'breaker', breaker, BREAKER_OPTIONS);
    const { threshold = DEFAULTS.threshold, coolDown = DEFAULTS.coolDown } = breaker ?? {};
    // The cap defaults to the larger of 5 s and the first cool-down (a long one given alone stays as given).
    const maxCoolDown =
      breaker?.maxCoolDown ?? Math.max(DEFAULTS.maxCoolDown, typeof coolDown === 'number' ? coolDown : 0);
    if (!Number.isInteger(threshold) || threshold < 1)
      throw invalidOption('breaker.threshold', threshold, 'an integer >= 1');
    if (typeof coolDown !== 'number' || !(coolDown >= 0) || !Number.isFinite(coolDown)) {
      throw invalidOption('breaker.coolDown', coolDown, 'a finite number of milliseconds >= 0');
    }
    if (typeof maxCoolDown !== 'number' || !(maxCoolDown >= coolDown) || !Number.isFinite(maxCoolDown)) {
      throw invalidOption(
        'breaker.maxCoolDown',
        maxCoolDown,
        `a finite number of milliseconds >= coolDown (${coolDown})`,
      );
    }
    // One per store, and in a Cluster one per master (see CallGuard.runGroups).
    newBreaker = () => new CircuitBreaker(threshold, coolDown, maxCoolDown);
  }
  const link = new RedisLink(
    client,
    // A reply still arriving is waited for as long as the largest value may take to move (guard.ts).
    new CallGuard(
      'redis',
      client,
      commandTimeout,
      readyTimeout,
      newBreaker,
      writeTimeout(commandTimeout, maxValueBytes),
    ),
    prefix,
    codec,
    maxKeyLength,
    tagTtl,
    maxValueBytes,
  );
  // A connection to a demoted master refuses every lock call: reconnect it (reconnect.ts).
  link.guard.onReplyError = reconnectOnReadOnly(client);
  return new RedisStoreImpl(
    link,
    defineScripts(client),
    invalidationWindow,
    subscriber === false ? undefined : new FillAnnouncements(subscriber, link),
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
  /** PX of an invalidation marker, as the scripts take it. */
  readonly #invalidationWindow: string;
  readonly #announcements: FillAnnouncements | undefined;

  constructor(
    link: RedisLink,
    scripts: LockScripts,
    invalidationWindow: number,
    announcements: FillAnnouncements | undefined,
  ) {
    this.#link = link;
    this.#scripts = scripts;
    this.#invalidationWindow = String(invalidationWindow);
    this.#announcements = announcements;
    this.lock = new RedisFillLock(link, scripts, announcements);
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

  async setMany(writes: readonly StoreWrite[]): Promise<void> {
    if (writes.length === 0) return;
    this.lock.flushWrites();
    const link = this.#link;
    const keys: string[] = [];
    const payloads: (string | Buffer)[] = [];
    const pxs: number[] = [];
    const sinces: (number | undefined)[] = [];
    for (let i = 0; i < writes.length; i++) {
      const write = writes[i]!;
      const payload = link.encode(write);
      if (payload === undefined) continue;
      keys.push(link.valueKey(write.key));
      payloads.push(payload);
      pxs.push(link.px(write));
      sinces.push(write.since);
    }
    if (keys.length === 0) return;
    // Admitted only once something will be sent (see clear()).
    // ioredis sends a Cluster pipeline to one node only: one pipeline per master.
    const groups = link.cluster ? groupPositions(keys.length, (i) => link.nodeOf(keys[i]!)) : null;
    const client = link.client;
    const send = (indices: number[] | null) => {
      const pipeline = client.pipeline();
      const count = indices === null ? keys.length : indices.length;
      for (let j = 0; j < count; j++) {
        const i = indices === null ? j : indices[j]!;
        const since = sinces[i];
        // A fill's unlocked write checks the key's invalidation marker (same slot: same hash tag).
        if (since !== undefined)
          (pipeline as unknown as ScriptPipeline).herdcacheWriteUnlessInvalidated1(
            2,
            keys[i]!,
            keys[i]! + INVALIDATED_SUFFIX,
            payloads[i]!,
            pxs[i]!,
            since,
          );
        else if (pxs[i] === 0) pipeline.set(keys[i]!, payloads[i]!);
        else pipeline.set(keys[i]!, payloads[i]!, 'PX', pxs[i]!);
      }
      return pipeline.exec().then((result) => {
        if (result === null)
          throw new HerdcacheError('E_STORE_ERROR', 'herdcache: redis setMany failed: pipeline was discarded');
        for (const [error] of result) if (error) throw storeError('redis', 'setMany', error);
      });
    };
    await link.call('setMany', keys, groups, send, none, link.sending(payloads));
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

  /**
   * The current version of each tag: one MGET (in a Cluster, one per hash slot, in parallel).
   * A missing key is version 0; a key that is not an integer (not ours) is NaN, which the registry
   * treats as "unknown": the value is served but not cached.
   */
  async tagVersions(tags: readonly string[]): Promise<number[]> {
    const n = tags.length;
    if (n === 0) return [];
    this.lock.flushWrites();
    const link = this.#link;
    const keys = link.tagKeys(tags);
    const groups = link.slotGroups(keys);
    const client = link.client;
    const send = (indices: number[] | null) => client.mget(indices === null ? keys : pick(keys, indices));
    // A failed group's versions are NaN: unknown, so its tagged values are served, not cached.
    return link.call('tagVersions', keys, groups, send, (replies) => {
      const out = new Array<number>(n).fill(NaN);
      for (let g = 0; g < replies.length; g++) {
        const reply = replies[g];
        if (reply === undefined) continue;
        const indices = groups === null ? null : groups[g]!;
        for (let j = 0; j < reply.length; j++) out[indices === null ? j : indices[j]!] = readVersion(reply[j]);
      }
      return out;
    });
  }

  /**
   * Bumps each tag's version: one script call of INCR + PEXPIRE per tag (in a Cluster, one per
   * hash slot, in parallel). Every entry recorded with an older version is a miss from the moment
   * the script has run, on every replica, whatever tier it is read from next (an in-process L1
   * is told separately: see tieredStore). No scan, no delete of entries: they expire on their own.
   */
  async invalidateTags(tags: readonly string[]): Promise<void> {
    if (tags.length === 0) return;
    this.lock.flushWrites();
    const link = this.#link;
    const keys = link.tagKeys(tags);
    const groups = link.slotGroups(keys);
    const scripts = this.#scripts;
    const keep = String(versionKeyTtl(link.tagTtl));
    await link.call(
      'invalidateTags',
      keys,
      groups,
      (indices) => {
        const batch = indices === null ? keys : pick(keys, indices);
        return scripts.herdcacheTagBump1(batch.length, batch, keep);
      },
      none,
    );
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
   * Removes every key under this store's prefix: SCAN + UNLINK page by page (on every master in
   * a Cluster), never KEYS. An admin operation: it walks the keyspace, each command bounded by
   * `commandTimeout`, and keys written while it runs may survive it.
   */
  async clear(): Promise<void> {
    this.lock.flushWrites();
    const link = this.#link;
    const guard = link.guard;
    const pattern = `${escapeGlob(link.clientPrefix + link.prefix)}{*`;
    // Each page is admitted once, right before the command that settles it: a half-open breaker
    // admits one trial, and an admission that sends nothing would hold that trial forever.
    const nodes = link.cluster ? (link.client as Cluster).nodes('master') : [link.client as Redis];
    const strip = link.clientPrefix.length;
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, found] = await guard.run('clear', () => node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT));
        cursor = next;
        if (found.length === 0) continue;
        // The client adds its keyPrefix again on UNLINK: hand it the keys without it.
        const keys = strip === 0 ? found : found.map((key) => key.slice(strip));
        const groups = link.slotGroups(keys);
        const client = link.client;
        await guard.run('clear', () =>
          link.perGroup(groups, (indices) => client.unlink(indices === null ? keys : pick(keys, indices))),
        );
      } while (cursor !== '0');
    }
  }
}

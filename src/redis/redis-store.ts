/**
 * The Redis store: entries shared by every replica, and the fill lock that lets one replica fill
 * a key while the others wait for its value.
 *
 * Round trips: a batch read is one MGET, a batch write one pipeline, a batch of lock attempts one
 * script call (in a Cluster: one per hash slot, sent in parallel). Freshness travels inside the
 * payload, so a hit is one read and nothing else.
 *
 * Faults: the cache must never be the outage. Every call is bounded by `commandTimeout`; a client
 * that is not connected fails at once instead of queueing the command offline; a circuit breaker
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
 * expiries, and why they cannot bring an invalidated value back: redis-tags.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import { HerdcacheError, invalidOption } from '../core/errors';
import { CircuitBreaker, type BreakerOptions, type BreakerState } from './breaker';
import { jsonCodec, type Codec } from './codec';
import { defineScripts, type LockScripts } from './scripts';
import { CallGuard, storeError } from './guard';
import { keptFor, readVersion, TAG_TTL_DEFAULT, versionKeyTtl } from './tags';
import { escapeGlob, groupPositions, hashSlot, LOCK_SUFFIX, MIN_KEY_LENGTH, pick, pickPairs, tagVersionKey, taggedKey, withLockKeys } from './keys';
import type { Entry } from '../core/freshness';
import type { FillLock, LockAttempt, Store, StoreReporter, StoreWrite } from '../core/store';

export interface RedisStoreOptions {
  /** The user's ioredis client, `Redis` or `Cluster`. Connected and owned by the user. */
  client: Redis | Cluster;
  /** Prepended to every key; must not contain '{' or '}' (the keys' hash tag). Default "herdcache:". */
  prefix?: string;
  /** How entries become payloads. Default: JSON with a format version (`jsonCodec`). */
  codec?: Codec;
  /** Milliseconds any store call may take before it rejects with E_STORE_TIMEOUT. Default 250. */
  commandTimeout?: number;
  /** Circuit breaker, or `false` for none. Default `{ threshold: 5, coolDown: 5000 }`. */
  breaker?: BreakerOptions | false;
  /** Keys longer than this many characters are stored under a sha256 of the key. Default 256. */
  maxKeyLength?: number;
  /**
   * Milliseconds. A tagged entry is kept at most this long (its PX is clamped to it), and a tag's
   * version key expires 2 × tagTtl after the tag's last invalidation, so a tag invalidated once
   * costs one key for a bounded time (redis-tags.ts says why both). Default 7 days.
   */
  tagTtl?: number;
}

export interface RedisStore extends Store {
  readonly name: 'redis';
  readonly lock: FillLock;
  /** Where encode and decode errors go; until called, they are dropped. */
  bind(reporter: StoreReporter): void;
  /** The circuit breaker's state, for health checks; "disabled" with `breaker: false`. */
  readonly breakerState: BreakerState | 'disabled';
  tagVersions(tags: readonly string[]): Promise<number[]>;
  invalidateTags(tags: readonly string[]): Promise<void>;
  /** The `prefix` option (without the client's own keyPrefix). */
  readonly prefix: string;
  /** The user's client, as given. */
  readonly client: Redis | Cluster;
  /**
   * PUBLISH on the store's client, bounded like every other call (timeout, breaker). Used by
   * tieredStore to tell other replicas what changed; resolves with the number of receivers.
   */
  publish(channel: string, message: string): Promise<number>;
}

const DEFAULTS = {
  prefix: 'herdcache:',
  commandTimeout: 250,
  threshold: 5,
  coolDown: 5000,
  maxKeyLength: 256,
  tagTtl: TAG_TTL_DEFAULT,
} as const;

/** setTimeout's ceiling; a longer timeout would fire at once. */
const MAX_TIMEOUT = 2 ** 31 - 1;
/** SCAN page size hint for clear(): large enough to be quick, small enough not to block Redis. */
const SCAN_COUNT = 1000;

const NO_REPORTER: StoreReporter = { encodeError() {}, decodeError() {} };

type Raw = string | Buffer | null;

export function redisStore(options: RedisStoreOptions): RedisStore {
  if (options === null || typeof options !== 'object') throw invalidOption('options', options, 'an object with a "client"');
  const { client, prefix = DEFAULTS.prefix, codec = jsonCodec, commandTimeout = DEFAULTS.commandTimeout, breaker, maxKeyLength = DEFAULTS.maxKeyLength, tagTtl = DEFAULTS.tagTtl } = options;
  const candidate = client as Partial<Redis> | null | undefined;
  if (candidate === null || typeof candidate !== 'object' || typeof candidate.defineCommand !== 'function' || typeof candidate.mget !== 'function' || typeof candidate.status !== 'string') {
    throw invalidOption('client', client, 'an ioredis Redis or Cluster client');
  }
  if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
    throw invalidOption('prefix', prefix, "a string without '{' or '}' (they would change the keys' Cluster hash tag)");
  }
  if (codec === null || typeof codec !== 'object' || typeof codec.encode !== 'function' || typeof codec.decode !== 'function') {
    throw invalidOption('codec', codec, 'an object with encode(entry) and decode(raw) functions');
  }
  if (typeof commandTimeout !== 'number' || !(commandTimeout > 0) || commandTimeout > MAX_TIMEOUT) {
    throw invalidOption('commandTimeout', commandTimeout, `a number of milliseconds in (0, ${MAX_TIMEOUT}]`);
  }
  if (!Number.isInteger(maxKeyLength) || maxKeyLength < MIN_KEY_LENGTH) {
    throw invalidOption('maxKeyLength', maxKeyLength, `an integer >= ${MIN_KEY_LENGTH} (a hashed key is a readable head, '#' and 64 hex chars)`);
  }
  if (!Number.isSafeInteger(tagTtl) || tagTtl < 1 || 2 * tagTtl > Number.MAX_SAFE_INTEGER) {
    throw invalidOption('tagTtl', tagTtl, 'a positive integer number of milliseconds');
  }
  let circuit: CircuitBreaker | undefined;
  if (breaker !== false) {
    if (breaker !== undefined && (breaker === null || typeof breaker !== 'object')) {
      throw invalidOption('breaker', breaker, 'false or an object { threshold?, coolDown? }');
    }
    const { threshold = DEFAULTS.threshold, coolDown = DEFAULTS.coolDown } = breaker ?? {};
    if (!Number.isInteger(threshold) || threshold < 1) throw invalidOption('breaker.threshold', threshold, 'an integer >= 1');
    if (typeof coolDown !== 'number' || !(coolDown >= 0) || !Number.isFinite(coolDown)) {
      throw invalidOption('breaker.coolDown', coolDown, 'a finite number of milliseconds >= 0');
    }
    circuit = new CircuitBreaker(threshold, coolDown);
  }
  return new RedisStoreImpl(client, prefix, codec, commandTimeout, circuit, maxKeyLength, tagTtl);
}

class RedisStoreImpl implements RedisStore {
  readonly name = 'redis' as const;
  readonly lock: FillLock;
  readonly #client: Redis | Cluster;
  readonly #scripts: LockScripts;
  readonly #cluster: boolean;
  readonly #prefix: string;
  /** ioredis's own `keyPrefix`: added by the client to every key, so part of the real key. */
  readonly #clientPrefix: string;
  readonly #codec: Codec;
  readonly #guard: CallGuard;
  readonly #maxKeyLength: number;
  readonly #tagTtl: number;
  #reporter: StoreReporter = NO_REPORTER;

  constructor(client: Redis | Cluster, prefix: string, codec: Codec, timeout: number, breaker: CircuitBreaker | undefined, maxKeyLength: number, tagTtl: number) {
    this.#client = client;
    this.#tagTtl = tagTtl;
    this.#scripts = defineScripts(client);
    this.#cluster = client.isCluster === true;
    this.#prefix = prefix;
    this.#clientPrefix = client.options?.keyPrefix ?? '';
    this.#codec = codec;
    this.#guard = new CallGuard('redis', client, timeout, breaker);
    this.#maxKeyLength = maxKeyLength;
    this.lock = {
      acquire: (keys, token, ttlMs) => this.#acquire(keys, token, ttlMs),
      writeAndRelease: (writes, token) => this.#writeAndRelease(writes, token),
      release: (keys, token) => this.#release(keys, token),
    };
  }

  get breakerState(): BreakerState | 'disabled' {
    return this.#guard.breakerState;
  }

  get prefix(): string {
    return this.#prefix;
  }

  get client(): Redis | Cluster {
    return this.#client;
  }

  bind(reporter: StoreReporter): void {
    this.#reporter = reporter;
  }

  async getMany(keys: readonly string[]): Promise<(Entry | undefined)[]> {
    const n = keys.length;
    if (n === 0) return [];
    this.#guard.admit('getMany');
    const valueKeys = this.#valueKeys(keys);
    const groups = this.#slotGroups(valueKeys);
    const binary = this.#codec.binary === true;
    const client = this.#client;
    const replies = await this.#guard.bound('getMany', this.#perGroup(groups, (indices): Promise<Raw[]> => {
      const batch = indices === null ? valueKeys : pick(valueKeys, indices);
      return binary ? client.mgetBuffer(batch) : client.mget(batch);
    }));
    const out = new Array<Entry | undefined>(n);
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; j < reply.length; j++) {
        const i = indices === null ? j : indices[j]!;
        const raw = reply[j];
        out[i] = raw === null || raw === undefined ? undefined : this.#decode(keys[i]!, raw);
      }
    }
    return out;
  }

  async setMany(writes: readonly StoreWrite[]): Promise<void> {
    if (writes.length === 0) return;
    const keys: string[] = [];
    const payloads: (string | Buffer)[] = [];
    const pxs: number[] = [];
    for (let i = 0; i < writes.length; i++) {
      const write = writes[i]!;
      const payload = this.#encode(write);
      if (payload === undefined) continue;
      keys.push(this.#valueKey(write.key));
      payloads.push(payload);
      pxs.push(this.#px(write));
    }
    if (keys.length === 0) return;
    // Admitted only once something will be sent (see clear()).
    this.#guard.admit('setMany');
    // ioredis sends a Cluster pipeline to one node only: one pipeline per master.
    const groups = this.#cluster ? groupPositions(keys.length, (i) => this.#nodeOf(keys[i]!)) : null;
    const client = this.#client;
    const results = await this.#guard.bound('setMany', this.#perGroup(groups, (indices) => {
      const pipeline = client.pipeline();
      const count = indices === null ? keys.length : indices.length;
      for (let j = 0; j < count; j++) {
        const i = indices === null ? j : indices[j]!;
        if (pxs[i] === 0) pipeline.set(keys[i]!, payloads[i]!);
        else pipeline.set(keys[i]!, payloads[i]!, 'PX', pxs[i]!);
      }
      return pipeline.exec();
    }));
    for (const result of results) {
      if (result === null) throw new HerdcacheError('E_STORE_ERROR', 'herdcache: redis setMany failed: pipeline was discarded');
      for (const [error] of result) if (error) throw storeError('redis', 'setMany', error);
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    const n = keys.length;
    if (n === 0) return;
    this.#guard.admit('delete');
    const valueKeys = this.#valueKeys(keys);
    const groups = this.#slotGroups(valueKeys);
    const client = this.#client;
    // The lock goes too: a fill that started before this invalidation then fails its fenced
    // write instead of storing a value computed from data older than the invalidation.
    await this.#guard.bound('delete', this.#perGroup(groups, (indices) => client.unlink(withLockKeys(valueKeys, indices))));
  }

  /**
   * The current version of each tag: one MGET (in a Cluster, one per hash slot, in parallel).
   * A missing key is version 0; a key that is not an integer (not ours) is NaN, which the registry
   * treats as "unknown": the value is served but not cached.
   */
  async tagVersions(tags: readonly string[]): Promise<number[]> {
    const n = tags.length;
    if (n === 0) return [];
    this.#guard.admit('tagVersions');
    const keys = this.#tagKeys(tags);
    const groups = this.#slotGroups(keys);
    const client = this.#client;
    const replies = await this.#guard.bound('tagVersions', this.#perGroup(groups, (indices) => client.mget(indices === null ? keys : pick(keys, indices))));
    const out = new Array<number>(n);
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; j < reply.length; j++) out[indices === null ? j : indices[j]!] = readVersion(reply[j]);
    }
    return out;
  }

  /**
   * Bumps each tag's version: one script call of INCR + PEXPIRE per tag (in a Cluster, one per
   * hash slot, in parallel). Every entry recorded with an older version is a miss from the moment
   * the script has run, on every replica, whatever tier it is read from next (an in-process L1
   * is told separately: see tieredStore). No scan, no delete of entries: they expire on their own.
   */
  async invalidateTags(tags: readonly string[]): Promise<void> {
    if (tags.length === 0) return;
    this.#guard.admit('invalidateTags');
    const keys = this.#tagKeys(tags);
    const groups = this.#slotGroups(keys);
    const scripts = this.#scripts;
    const keep = String(versionKeyTtl(this.#tagTtl));
    await this.#guard.bound('invalidateTags', this.#perGroup(groups, (indices) => {
      const batch = indices === null ? keys : pick(keys, indices);
      return scripts.herdcacheTagBump1(batch.length, batch, keep);
    }));
  }

  async publish(channel: string, message: string): Promise<number> {
    this.#guard.admit('publish');
    return this.#guard.bound('publish', this.#client.publish(channel, message));
  }

  /**
   * Removes every key under this store's prefix: SCAN + UNLINK page by page (on every master in
   * a Cluster), never KEYS. An admin operation: it walks the keyspace, each command bounded by
   * `commandTimeout`, and keys written while it runs may survive it.
   */
  async clear(): Promise<void> {
    const pattern = `${escapeGlob(this.#clientPrefix + this.#prefix)}{*`;
    // Each page is admitted once, right before the command that settles it: a half-open breaker
    // admits one trial, and an admit that never reaches bound() would hold that trial forever.
    const nodes = this.#cluster ? (this.#client as Cluster).nodes('master') : [this.#client as Redis];
    const strip = this.#clientPrefix.length;
    for (const node of nodes) {
      let cursor = '0';
      do {
        this.#guard.admit('clear');
        const [next, found] = await this.#guard.bound('clear', node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT));
        cursor = next;
        if (found.length === 0) continue;
        // The client adds its keyPrefix again on UNLINK: hand it the keys without it.
        const keys = strip === 0 ? found : found.map((key) => key.slice(strip));
        const groups = this.#slotGroups(keys);
        const client = this.#client;
        this.#guard.admit('clear');
        await this.#guard.bound('clear', this.#perGroup(groups, (indices) => client.unlink(indices === null ? keys : pick(keys, indices))));
      } while (cursor !== '0');
    }
  }

  async #acquire(keys: readonly string[], token: string, ttlMs: number): Promise<LockAttempt[]> {
    const n = keys.length;
    if (n === 0) return [];
    this.#guard.admit('lock.acquire');
    const valueKeys = this.#valueKeys(keys);
    const groups = this.#slotGroups(valueKeys);
    const px = toPx(ttlMs);
    const binary = this.#codec.binary === true;
    const scripts = this.#scripts;
    const replies = await this.#guard.bound('lock.acquire', this.#perGroup(groups, (indices): Promise<(number | Raw)[]> => {
      const pairs = withLockKeys(valueKeys, indices);
      return binary
        ? scripts.herdcacheLockAcquire1Buffer(pairs.length, pairs, token, px)
        : scripts.herdcacheLockAcquire1(pairs.length, pairs, token, px);
    }));
    const out = new Array<LockAttempt>(n);
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; 2 * j < reply.length; j++) {
        const i = indices === null ? j : indices[j]!;
        const raw = reply[2 * j + 1];
        const entry = raw === null || raw === undefined || typeof raw === 'number' ? undefined : this.#decode(keys[i]!, raw);
        out[i] = { won: reply[2 * j] === 1, entry };
      }
    }
    return out;
  }

  async #writeAndRelease(writes: readonly StoreWrite[], token: string): Promise<boolean[]> {
    const n = writes.length;
    if (n === 0) return [];
    this.#guard.admit('lock.writeAndRelease');
    const valueKeys = new Array<string>(n);
    // Per write: payload then px. An unencodable value still releases its lock ('-1'), so the
    // other replicas stop waiting on it now instead of after the lock ttl.
    const args = new Array<string | Buffer>(2 * n);
    for (let i = 0; i < n; i++) {
      const write = writes[i]!;
      valueKeys[i] = this.#valueKey(write.key);
      const payload = this.#encode(write);
      args[2 * i] = payload ?? '';
      args[2 * i + 1] = payload === undefined ? '-1' : String(this.#px(write));
    }
    const groups = this.#slotGroups(valueKeys);
    const scripts = this.#scripts;
    const replies = await this.#guard.bound('lock.writeAndRelease', this.#perGroup(groups, (indices) => {
      const pairs = withLockKeys(valueKeys, indices);
      return scripts.herdcacheLockWrite1(pairs.length, pairs, token, indices === null ? args : pickPairs(args, indices));
    }));
    const out = new Array<boolean>(n);
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; j < reply.length; j++) out[indices === null ? j : indices[j]!] = reply[j] === 1;
    }
    return out;
  }

  async #release(keys: readonly string[], token: string): Promise<void> {
    const n = keys.length;
    if (n === 0) return;
    this.#guard.admit('lock.release');
    const lockKeys = new Array<string>(n);
    for (let i = 0; i < n; i++) lockKeys[i] = this.#valueKey(keys[i]!) + LOCK_SUFFIX;
    const groups = this.#slotGroups(lockKeys);
    const scripts = this.#scripts;
    await this.#guard.bound('lock.release', this.#perGroup(groups, (indices) => {
      const batch = indices === null ? lockKeys : pick(lockKeys, indices);
      return scripts.herdcacheLockRelease1(batch.length, batch, token);
    }));
  }

  /** One call for everything (standalone), or one per group in parallel (Cluster). */
  #perGroup<T>(groups: number[][] | null, send: (indices: number[] | null) => Promise<T>): Promise<T[]> {
    return groups === null ? send(null).then(one) : Promise.all(groups.map(send));
  }

  /** Positions grouped by hash slot in a Cluster; null (one group, all positions) otherwise. */
  #slotGroups(keys: readonly string[]): number[][] | null {
    if (!this.#cluster) return null;
    const clientPrefix = this.#clientPrefix;
    return groupPositions(keys.length, (i) => hashSlot(clientPrefix + keys[i]!));
  }

  /** The master that serves a key's slot, as ioredis routes it; the slot itself if unknown yet. */
  #nodeOf(key: string): string | number {
    const slot = hashSlot(this.#clientPrefix + key);
    return (this.#client as Cluster).slots[slot]?.[0] ?? slot;
  }

  #valueKey(key: string): string {
    return `${this.#prefix}{${taggedKey(key, this.#maxKeyLength)}}`;
  }

  #tagKeys(tags: readonly string[]): string[] {
    const out = new Array<string>(tags.length);
    for (let i = 0; i < tags.length; i++) out[i] = tagVersionKey(this.#prefix, tags[i]!, this.#maxKeyLength);
    return out;
  }

  /** PX of a write (0: no expiry); a tagged entry is kept at most tagTtl (see redis-tags.ts). */
  #px(write: StoreWrite): number {
    const ttl = keptFor(write, this.#tagTtl);
    return ttl === Infinity ? 0 : toPx(ttl);
  }

  #valueKeys(keys: readonly string[]): string[] {
    const out = new Array<string>(keys.length);
    for (let i = 0; i < keys.length; i++) out[i] = this.#valueKey(keys[i]!);
    return out;
  }

  #encode(write: StoreWrite): string | Buffer | undefined {
    try {
      return this.#codec.encode(write.entry);
    } catch (error) {
      report(this.#reporter, 'encodeError', write.key, error);
      return undefined;
    }
  }

  #decode(key: string, raw: string | Buffer): Entry | undefined {
    try {
      return this.#codec.decode(raw);
    } catch (error) {
      report(this.#reporter, 'decodeError', key, error);
      return undefined;
    }
  }
}

/** Rounds a ttl up to whole milliseconds, at least 1 (PX 0 is an error in Redis). */
function toPx(ttl: number): number {
  return ttl > 1 ? Math.ceil(ttl) : 1;
}

function one<T>(value: T): T[] {
  return [value];
}

/** The registry's reporter should not throw; if it does, the read or write still goes on. */
function report(reporter: StoreReporter, kind: 'encodeError' | 'decodeError', key: string, error: unknown): void {
  try {
    reporter[kind](key, error);
  } catch {
    // Reporting is best effort by contract: a broken hook must not turn bad data into an outage.
  }
}

/**
 * What every part of the Redis store shares about talking to Redis: the user's client behind the
 * call guard, the key names (prefix, hash tags), how a batch splits into Cluster hash slots, and the
 * codec with its error reporting. The store's reads and writes (redis-store.ts) and its fill lock
 * (redis-lock.ts) are built on one of these.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Entry } from '../core/freshness';
import type { StoreReporter, StoreWrite } from '../core/store';
import type { Codec } from './codec';
import { HerdcacheError, StorePartialError } from '../core/errors';
import type { CallGuard, CallOptions } from './guard';
import { groupPositions, hashSlot, tagVersionKey, taggedKey } from './keys';
import { keptFor } from './tags';
import { PresenceHints } from './presence';

const NO_REPORTER: StoreReporter = { encodeError() {}, decodeError() {} };

/** Value keys remembered at most (RedisLink.valueKey), and the longest cache key remembered. */
const VALUE_KEY_MEMO = 10_000;
const VALUE_KEY_MEMO_LENGTH = 256;

/**
 * A call of many keys (a loader batch of 40,000 in one tick: one lock script for all) is timed as
 * if it sent this many bytes more per key: 1 ms more per ~40 keys (see writeTimeout), what a
 * script's per-key work costs Redis on a busy machine. A call of fewer keys keeps the command timeout.
 */
const KEY_BUDGET_BYTES = 100;
const KEYS_BUDGETED_FROM = 1000;

/** A string this short is never scanned for its UTF-8 length: its budget is off by < 32 ms at most. */
const SCANNED_FROM = 64 * 1024;

/** A reply value of MGET or of a script: a payload, or nil. */
export type Raw = string | Buffer | null;

export class RedisLink {
  readonly client: Redis | Cluster;
  readonly guard: CallGuard;
  readonly cluster: boolean;
  readonly prefix: string;
  /** ioredis's own `keyPrefix`: added by the client to every key, so part of the real key. */
  readonly clientPrefix: string;
  readonly codec: Codec;
  /** Whether payloads are read with the Buffer variants of the commands (see Codec.binary). */
  readonly binary: boolean;
  readonly tagTtl: number;
  readonly #maxKeyLength: number;
  readonly #maxValueBytes: number;
  /**
   * Value keys made lately (cache key → `prefix{K}`), so a warm read of the same keys builds no
   * string per key and ioredis writes one already flat (a template literal is a rope it flattens
   * on every write). Two generations: when the current one is full it becomes the previous one
   * (a key found there moves back), so a working set a little over the bound still hits. At most
   * 2 × VALUE_KEY_MEMO keys of ≤ VALUE_KEY_MEMO_LENGTH chars each (a few MB at worst); longer keys
   * are not kept.
   */
  #valueKeys = new Map<string, string>();
  #previousValueKeys = new Map<string, string>();
  /** Keys read present, and until when: which reads also try locks (presence.ts). */
  readonly presence = new PresenceHints();
  /** Writes skipped because their payload was larger than maxValueBytes. */
  oversized = 0;
  reporter: StoreReporter = NO_REPORTER;

  constructor(
    client: Redis | Cluster,
    guard: CallGuard,
    prefix: string,
    codec: Codec,
    maxKeyLength: number,
    tagTtl: number,
    maxValueBytes: number,
  ) {
    this.client = client;
    this.guard = guard;
    this.cluster = client.isCluster === true;
    this.prefix = prefix;
    this.clientPrefix = client.options?.keyPrefix ?? '';
    this.codec = codec;
    this.binary = codec.binary === true;
    this.tagTtl = tagTtl;
    this.#maxKeyLength = maxKeyLength;
    this.#maxValueBytes = maxValueBytes;
  }

  // ── key names ──────────────────────────────────────────────────────────────────────────

  valueKey(key: string): string {
    const known = this.#valueKeys.get(key);
    if (known !== undefined) return known;
    const valueKey = this.#previousValueKeys.get(key) ?? `${this.prefix}{${taggedKey(key, this.#maxKeyLength)}}`;
    if (key.length <= VALUE_KEY_MEMO_LENGTH) {
      if (this.#valueKeys.size >= VALUE_KEY_MEMO) {
        this.#previousValueKeys = this.#valueKeys;
        this.#valueKeys = new Map();
      }
      this.#valueKeys.set(key, valueKey);
    }
    return valueKey;
  }

  /** @internal Whether the value key of `key` is remembered (tests). */
  _remembers(key: string): boolean {
    return this.#valueKeys.has(key) || this.#previousValueKeys.has(key);
  }

  /** @internal Value keys remembered, both generations (tests: the memo stays bounded). */
  get _valueKeysHeld(): number {
    return this.#valueKeys.size + this.#previousValueKeys.size;
  }

  valueKeys(keys: readonly string[]): string[] {
    const out = new Array<string>(keys.length);
    for (let i = 0; i < keys.length; i++) out[i] = this.valueKey(keys[i]!);
    return out;
  }

  tagKeys(tags: readonly string[]): string[] {
    const out = new Array<string>(tags.length);
    for (let i = 0; i < tags.length; i++) out[i] = tagVersionKey(this.prefix, tags[i]!, this.#maxKeyLength);
    return out;
  }

  // ── Cluster slots ──────────────────────────────────────────────────────────────────────

  /** Positions grouped by hash slot in a Cluster; null (one group, all positions) otherwise. */
  slotGroups(keys: readonly string[]): number[][] | null {
    if (!this.cluster) return null;
    const clientPrefix = this.clientPrefix;
    return groupPositions(keys.length, (i) => hashSlot(clientPrefix + keys[i]!));
  }

  /** The master that serves a key's slot, as ioredis routes it; the slot itself if unknown yet. */
  nodeOf(key: string): string | number {
    const slot = hashSlot(this.clientPrefix + key);
    return (this.client as Cluster).slots[slot]?.[0] ?? slot;
  }

  /**
   * Sends a batch: one call (standalone), or one per group in parallel (Cluster), each group
   * guarded by its master's breaker and settling on its own, timed by its size (KEY_BUDGET_BYTES).
   * `assemble` builds the result from the replies; a failed group's reply is undefined. Some groups failed: rejects with a
   * StorePartialError carrying the assembled result of the others; all failed: with the failure.
   */
  async call<T, R>(
    op: string,
    keys: readonly string[],
    groups: number[][] | null,
    send: (indices: number[] | null) => Promise<T>,
    assemble: (replies: readonly (T | undefined)[]) => R,
    options?: CallOptions,
  ): Promise<R> {
    if (keys.length >= KEYS_BUDGETED_FROM)
      options = { ...options, bytes: (options?.bytes ?? 0) + keys.length * KEY_BUDGET_BYTES };
    if (groups === null) return assemble([await this.guard.run(op, () => send(null), options)]);
    const master = (g: number): string => String(this.nodeOf(keys[groups[g]![0]!]!));
    const { values, failed, error, failedGroups } = await this.guard.runGroups(
      op,
      groups.length,
      master,
      (g) => send(groups[g]!),
      options,
    );
    if (failed === 0) return assemble(values);
    if (failed === groups.length) throw error;
    const message = `herdcache: redis ${op} failed for ${failed} of ${groups.length} slot groups: ${(error as Error | undefined)?.message ?? String(error)}`;
    const failedAt: number[] = [];
    for (let g = 0; g < groups.length; g++) if (failedGroups[g] === true) failedAt.push(...groups[g]!);
    throw new StorePartialError(error, assemble(values), message, failedAt);
  }

  /** One call for everything (standalone), or one per group in parallel (Cluster). */
  perGroup<T>(groups: number[][] | null, send: (indices: number[] | null) => Promise<T>): Promise<T[]> {
    return groups === null ? send(null).then(one) : Promise.all(groups.map(send));
  }

  // ── payloads ───────────────────────────────────────────────────────────────────────────

  /** PX of a write (0: no expiry); a tagged entry is kept at most tagTtl (see tags.ts). */
  px(write: StoreWrite): number {
    const ttl = keptFor(write, this.tagTtl);
    return ttl === Infinity ? 0 : toPx(ttl);
  }

  /**
   * The payload of a write, or undefined when it is not to be stored: the codec failed, or the
   * payload is larger than maxValueBytes (a write that big would hold the connection, and every
   * read of it, for longer than a cache is worth). Both are reported (encodeErrors, onStoreError);
   * the value is still answered to its callers.
   */
  encode(write: StoreWrite): string | Buffer | undefined {
    const kept = this.#kept.get(write.entry);
    if (kept !== undefined) return kept;
    let payload: string | Buffer;
    try {
      payload = this.codec.encode(write.entry);
    } catch (error) {
      report(this.reporter, 'encodeError', write.key, error);
      return undefined;
    }
    return this.#capped(write.key, payload);
  }

  /**
   * Store.keeps: whether the entry's payload is within maxValueBytes (skipped, it is reported as
   * encode does). The payload is kept for the write that follows at once (encode), not made twice.
   */
  keeps(key: string, entry: Entry): boolean {
    let payload: string | Buffer;
    try {
      payload = this.codec.encode(entry);
    } catch {
      return true; // the write reports it (encodeErrors), as for any value
    }
    const capped = this.#capped(key, payload);
    if (capped === undefined) return false;
    this.#kept.set(entry, capped);
    return true;
  }

  /** The payloads keeps() made, for their entries' writes (gone with the entry). */
  readonly #kept = new WeakMap<Entry, string | Buffer>();

  #capped(key: string, payload: string | Buffer): string | Buffer | undefined {
    const cap = this.#maxValueBytes;
    // UTF-8 takes at most 3 bytes per UTF-16 unit: only a string that could pass the cap is counted.
    const length = payload.length;
    if (length > cap || (typeof payload === 'string' && 3 * length > cap && Buffer.byteLength(payload) > cap)) {
      this.oversized++;
      const bytes = typeof payload === 'string' ? Buffer.byteLength(payload) : length;
      const error = new HerdcacheError(
        'E_VALUE_TOO_LARGE',
        `herdcache: redis value not stored: its payload is ${bytes} bytes, more than maxValueBytes (${cap})`,
      );
      report(this.reporter, 'encodeError', key, error);
      return undefined;
    }
    return payload;
  }

  /**
   * Options of a call that sends these payloads (with small arguments among them: tokens, PX): its
   * timeout follows their size (see CallOptions.bytes).
   */
  sending(payloads: readonly (string | Buffer)[], options?: CallOptions): CallOptions {
    let bytes = 0;
    for (let i = 0; i < payloads.length; i++) {
      const payload = payloads[i]!;
      const length = payload.length;
      bytes += typeof payload === 'string' && length >= SCANNED_FROM ? Buffer.byteLength(payload) : length;
    }
    return { ...options, bytes };
  }

  decode(key: string, raw: string | Buffer): Entry | undefined {
    try {
      return this.codec.decode(raw);
    } catch (error) {
      report(this.reporter, 'decodeError', key, error);
      return undefined;
    }
  }

  /**
   * A re-read of a key this load has read (and reported) already: the lock script's re-check,
   * each poll of a contended lock. Undecodable is a miss here too, but is not reported again, so
   * `decodeErrors` counts a bad payload once per load, not once per read.
   */
  decodeAgain(raw: string | Buffer): Entry | undefined {
    try {
      return this.codec.decode(raw);
    } catch {
      return undefined;
    }
  }
}

/** Rounds a ttl up to whole milliseconds, at least 1 (PX 0 is an error in Redis). */
export function toPx(ttl: number): number {
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

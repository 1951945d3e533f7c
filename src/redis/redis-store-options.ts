/**
 * redisStore()'s options: what each one means, its default, and the checks that refuse a bad one
 * (each error names the option and the value) before anything touches the client.
 */
import type { Cluster, Redis } from 'ioredis';
import { invalidArgument, invalidOption } from '../core/errors';
import { LONG_KEY_MAX } from '../core/long-keys';
import {
  MAX_DURATION,
  checkBoolean,
  checkKnownKeys,
  checkNestedKeys,
  checkPositiveInteger,
  optionNames,
} from '../core/options';
import { checkSubscriber } from './announcements';
import { CircuitBreaker, type BreakerOptions } from './breaker';
import { jsonCodec, type Codec } from './codec';
import { MAX_TIMEOUT } from './call-timeout';
import { MIN_KEY_LENGTH } from './keys';
import { TAG_TTL_DEFAULT } from './tags';

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
   * the budget of a `maxValueBytes` write (standalone Redis; see call-timeout.ts). Default 250.
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
   * fail fast as for a client that lost its connection. Not waited once a connection attempt
   * failed (refused: Redis is down). 0: never wait. Default 2000.
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
  /**
   * Keys longer than this many characters are stored under a sha256 of the key. Default 256; from
   * 65 to 1024 (keys longer than 1024 never reach a store: they are held as a digest already).
   */
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

/** The options checked, with their defaults filled in. */
export interface ResolvedRedisStoreOptions {
  readonly client: Redis | Cluster;
  readonly prefix: string;
  readonly codec: Codec;
  readonly commandTimeout: number;
  readonly readyTimeout: number;
  readonly invalidationWindow: number;
  /** Makes one circuit breaker (one per store, and in a Cluster one per master); undefined: none. */
  readonly newBreaker: (() => CircuitBreaker) | undefined;
  readonly maxKeyLength: number;
  readonly tagTtl: number;
  readonly subscriber: Redis | Cluster | false | undefined;
  readonly maxValueBytes: number;
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

/** Refuses unknown or bad options (HerdcacheError naming the option and the value); fills in the defaults. */
export function resolveRedisStoreOptions(options: RedisStoreOptions): ResolvedRedisStoreOptions {
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, 'an object with a "client"');
  // The client itself, given as the options (redisStore(client)): its own `options` would be named as unknown.
  if (isIoredisClient(options))
    throw invalidArgument(
      'options',
      options,
      'an object with a "client": redisStore({ client }), not redisStore(client)',
    );
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
  if (!isIoredisClient(client)) throw invalidOption('client', client, 'an ioredis Redis or Cluster client');
  const candidate = client as Redis | Cluster;
  // Closed (quit() or disconnect() was called): every call fails until client.connect(). Said, not
  // refused: a client whose retryStrategy gave up while Redis was down at boot is in this state too,
  // and the cache must not be what stops the application from starting.
  if (candidate.status === 'end') {
    process.emitWarning(
      'herdcache: redisStore() was given a closed ioredis client (status "end": quit() or disconnect() was called, or its retryStrategy gave up): every store call fails and loads are computed without the cache until client.connect().',
      { code: 'HERDCACHE_REDIS_CLOSED' },
    );
  }
  if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
    throw invalidOption('prefix', prefix, "a string without '{' or '}' (they would change the keys' Cluster hash tag)");
  }
  // No prefix at all (none on the client either): clear() would remove every key starting with "{",
  // another application's `{user}:1` too, and its keys would mix with theirs.
  const clientPrefix = (candidate.options as { keyPrefix?: unknown } | undefined)?.keyPrefix;
  if (prefix === '' && (typeof clientPrefix !== 'string' || clientPrefix === '')) {
    throw invalidOption(
      'prefix',
      prefix,
      "a non-empty string, unless the client has a keyPrefix (with neither, clear() would remove other applications' keys)",
    );
  }
  if (
    codec === null ||
    typeof codec !== 'object' ||
    typeof codec.encode !== 'function' ||
    typeof codec.decode !== 'function'
  ) {
    throw invalidOption('codec', codec, 'an object with encode(entry) and decode(raw) functions');
  }
  // Read as truthy, 'no' or 'false' would pick the Buffer commands for a text codec.
  if (codec.binary !== undefined) checkBoolean('codec.binary', codec.binary);
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
  // Above LONG_KEY_MAX a key is never longer (the registry holds longer keys as digests) and only a
  // long tag's version key would grow: up to any length Redis takes, for nothing.
  if (!Number.isInteger(maxKeyLength) || maxKeyLength < MIN_KEY_LENGTH || maxKeyLength > LONG_KEY_MAX) {
    throw invalidOption(
      'maxKeyLength',
      maxKeyLength,
      `an integer from ${MIN_KEY_LENGTH} (a hashed key is a readable head, '#' and 64 hex chars) to ${LONG_KEY_MAX} (longer keys never reach a store)`,
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
      breaker?.maxCoolDown !== undefined
        ? breaker.maxCoolDown
        : Math.max(DEFAULTS.maxCoolDown, typeof coolDown === 'number' ? coolDown : 0);
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
  return {
    client,
    prefix,
    codec,
    commandTimeout,
    readyTimeout,
    invalidationWindow,
    newBreaker,
    maxKeyLength,
    tagTtl,
    subscriber,
    maxValueBytes,
  };
}

/** Whether `value` looks like an ioredis Redis or Cluster client (what the `client` option takes). */
function isIoredisClient(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const candidate = value as Partial<Redis>;
  return (
    typeof candidate.defineCommand === 'function' &&
    typeof candidate.mget === 'function' &&
    typeof candidate.status === 'string'
  );
}

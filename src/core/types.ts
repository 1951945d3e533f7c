/**
 * Public types of the registry. Times in the TypeScript API are milliseconds.
 */
import type { Clock } from './freshness';
import type { Store } from './store';

/** Options shared by the registry, a loader, and one getOrCompute call (the narrower wins). */
export interface FreshnessOptions {
  /**
   * Milliseconds a value stays fresh; `Infinity`: stored, never stale. Default 0: coalesce-only,
   * nothing is stored (no store read, lock or write) while concurrent misses still share one fill
   * and one batch call. Storing values is always an explicit choice.
   */
  ttl?: number;
  /** Stale-while-revalidate grace in ms after `ttl`: stale values are served at once while one refresh runs. Default 0 (off). */
  swr?: number;
  /** Fraction in [0, 1]: each write's ttl is multiplied by a random factor in [1 - jitter, 1 + jitter]. Default 0. */
  jitter?: number;
  /** Use the store's distributed fill lock (Redis). Default: true when the store has one. */
  lock?: boolean;
  /**
   * Probabilistic early refresh (XFetch, Vattani et al., VLDB 2015): a read of a fresh value may
   * start one background refresh before expiry, more likely as expiry nears and the slower the
   * last fill was. `true` means beta = 1; a number is beta (> 1 favours earlier refreshes).
   * Default off. Needs `ttl`.
   */
  earlyRefresh?: boolean | number;
}

export interface LockOptions {
  /** Expiry of a fill lock in ms: bounds the damage of a filler that dies holding it. Default 10000. */
  lockTtl?: number;
  /** First poll delay in ms while another process fills; doubles up to 1000. Default 50. */
  lockPollInterval?: number;
  /** Longest wait in ms on another process's fill before filling locally. Default 5000. */
  lockWaitTimeout?: number;
}

/** Observer hooks: called synchronously; a throwing hook is ignored. `source` is the loader name, or "getOrCompute". */
export interface CacheHooks {
  onHit?(key: string, source: string): void;
  onMiss?(key: string, source: string): void;
  onStale?(key: string, source: string): void;
  onCoalesced?(key: string, source: string): void;
  /** A fill (or a loader's batch, once per key) finished. `error` is set when it failed. */
  onFill?(key: string, source: string, durationMs: number, error?: unknown): void;
  /** A store call failed or a value could not be encoded/decoded; the load went on without the store. */
  onStoreError?(error: unknown, operation: string): void;
  /**
   * Wraps each call of a fill or batch function, e.g. to run it inside a tracing span
   * (herdcache/otel): call `fill` once, synchronously, and return what it returns. Only fills reach
   * it, never a hit. A wrapper that throws or does not call `fill` does not stop the fill.
   */
  wrapFill?<T>(fill: () => Promise<T>, info: FillInfo): Promise<T>;
}

/** What wrapFill is told about one call of a fill or batch function. */
export interface FillInfo {
  /** The loader name, "getOrCompute", or a getOrCompute label. */
  readonly source: string;
  /** The keys this call computes (store keys; one for getOrCompute). */
  readonly keys: readonly string[];
  /**
   * The fill lock: "won" (this process holds the keys' locks), "timeout" (another process held
   * them past lockWaitTimeout), "failed" (the lock call failed), "none" (no lock: memory store,
   * `lock: false`).
   */
  readonly lock: 'won' | 'timeout' | 'failed' | 'none';
  /** A background refresh (stale-while-revalidate, early refresh): nobody waits on it. */
  readonly background: boolean;
  /** Callers waiting on these keys right now, the first caller of each included. */
  readonly callers: number;
  /** Keys whose fill failed: known once the promise of `fill()` has settled. */
  readonly failures: number;
}

export interface CacheOptions extends FreshnessOptions, LockOptions {
  /** Where entries live. Default: memoryStore() (in process, LRU, 10000 entries). */
  store?: Store;
  /** Time source (epoch ms). Default Date.now. */
  clock?: Clock;
  /** Most background refreshes (SWR) running at once in this process; more are dropped. Default 64. */
  maxRefreshes?: number;
  hooks?: CacheHooks;
}

export interface FillContext {
  readonly key: string;
  /** Fires only when every caller waiting on this fill has aborted, or the key was invalidated. */
  readonly signal: AbortSignal;
}

export interface GetOrComputeOptions extends FreshnessOptions {
  /** Stop waiting when this fires. Others waiting on the same fill are not disturbed. */
  signal?: AbortSignal;
  /** Names this call's source in metrics (default "getOrCompute"). Keep the set of labels small. */
  label?: string;
  /** Tags the value carries (e.g. ["User:42"]): cache.invalidateTags() of any makes it a miss. */
  tags?: readonly string[];
}

export type Fill<V> = (context: FillContext) => V | PromiseLike<V>;

export interface BatchContext {
  /** Fires only when every key of the batch has been abandoned by its callers. */
  readonly signal: AbortSignal;
}

/**
 * A batch function, as DataLoader's: given keys, return an array of the same length and order.
 * An `Error` at a position fails that key only; `undefined` means "nothing to cache" for that key.
 */
/** One value per key, in order: the value, an Error (that key fails), or a promise of either (settled first). */
export type BatchFn<K, V> = (
  keys: readonly K[],
  context: BatchContext,
) => PromiseLike<ReadonlyArray<V | Error | PromiseLike<V | Error>>> | ReadonlyArray<V | Error | PromiseLike<V | Error>>;

export interface LoaderOptions<K, V> extends FreshnessOptions {
  /** Unique per registry; namespaces keys (`name:key`) and labels metrics. */
  name: string;
  batch: BatchFn<K, V>;
  /** Maps a key to its string form. Default: strings as they are, finite numbers via String(). */
  key?: (key: K) => string;
  /** Most keys per batch call. Default Infinity. */
  maxBatchSize?: number;
  /**
   * DataLoader's option: when this loader's batch leaves. Given `dispatch`, call it once, soon
   * (`(dispatch) => setTimeout(dispatch, 5)` collects 5 ms of keys from every concurrent request
   * into one batch call, at the cost of up to 5 ms of latency). Default: once per tick, after
   * the promise jobs queued now, in one dispatch with every other loader's keys.
   */
  batchScheduleFn?: (dispatch: () => void) => void;
  /**
   * Tags of a key's value (e.g. id => [`User:${id}`]): cache.invalidateTags() of any makes it a
   * miss on every replica. A function of the key, not the value: tags must be known before the
   * fill so an invalidation racing it is not lost.
   */
  tags?: (key: K) => readonly string[];
}

export interface LoadOptions {
  signal?: AbortSignal;
}

export interface RequestOptions {
  /**
   * The request's own signal (the client went away): every load of the request stops waiting when
   * it fires, as if each had been given it, and a fill nobody else waits on is told to stop
   * (its FillContext.signal). A load's own signal still applies; either one ends its wait.
   */
  signal?: AbortSignal;
}

export interface Counters {
  /** Loads answered with a fresh value from the store. */
  hits: number;
  /** Loads that found nothing usable and started a fill (or a wait on another process's fill). */
  misses: number;
  /** Loads that joined a fill already in flight in this process. */
  coalesced: number;
  /** Loads answered with a stale value (within grace) while a refresh ran. */
  staleServed: number;
  /** Keys computed successfully by a fill or batch function. */
  fills: number;
  /** Keys whose fill failed (thrown, rejected, or an Error in the batch result). */
  fillFailures: number;
  /** Batch function calls. */
  batches: number;
  /** Keys sent to batch functions. */
  batchedKeys: number;
  /** Background refreshes started. */
  refreshes: number;
  /** Background refreshes dropped because `maxRefreshes` were running. */
  refreshesDropped: number;
  /** Fill locks won. */
  lockAcquired: number;
  /** Fill lock attempts that found another process filling. */
  lockContended: number;
  /** Waits on another process's fill that reached lockWaitTimeout and filled locally. */
  lockTimeouts: number;
  /** Store calls that failed (the load went on without the store). */
  storeErrors: number;
  /** Values that could not be encoded for the store (returned, not cached). */
  encodeErrors: number;
  /** Stored entries that could not be decoded (read as misses). */
  decodeErrors: number;
  /** Keys invalidated. */
  invalidations: number;
}

export interface MetricsSnapshot {
  readonly total: Counters;
  /** Per loader name; getOrCompute calls count under "getOrCompute". */
  readonly sources: Readonly<Record<string, Counters>>;
}

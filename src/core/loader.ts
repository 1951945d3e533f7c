/**
 * A batching loader shared by every request of the process.
 *
 * Keys asked for by all concurrent requests in one tick leave in one batch call, minus the keys
 * already cached (answered from the store) or already in flight (they join that flight). The
 * contract of `batch` is DataLoader's: same length and order as the keys; an `Error` at a
 * position fails that key only.
 */
import type { Item, Source } from './item';
import {
  HerdcacheBatchError,
  HerdcacheKeyError,
  describe,
  invalidArgument,
  invalidOption,
  isError,
  isThenable,
} from './errors';
import { RunBatchContext } from './fill-call';
import type { FillSignal } from './fill-run';
import { Failure, asError } from './flight';
import { ignoreRejection } from './hooks';
import type { Sink } from './metrics';
import type { Entry } from './freshness';
import type { Policy } from './options';
import type { Registry } from './registry';
import { checkLoadOptions, checkPositiveInteger, checkTags, storesValues } from './options';
import { MEMO_KEY_MAX } from './long-keys';
import { type BatchScheduleFn, afterPromiseJobs, checkBatchScheduleFn } from './tick';
import type { BatchFn, Counters, LoadOptions, LoaderOptions } from './types';

/** Errors that failed a whole batch (thrown, not an array, wrong length): a request scope forgets them. */
export const batchFailures = new WeakSet<object>();

/** DataLoader's test of what loadMany accepts: an array, or an array-like object. */
function isArrayLike(value: unknown): value is ArrayLike<unknown> {
  if (Array.isArray(value)) return true;
  if (typeof value !== 'object' || value === null) return false;
  const length = (value as { length?: unknown }).length;
  return (
    typeof length === 'number' &&
    (length === 0 || (length > 0 && Object.prototype.hasOwnProperty.call(value, length - 1)))
  );
}

/**
 * DataLoader's loadMany: one entry per key, an Error where that key failed; never rejects for a
 * key. Shared by the registry loader and the scoped one. Like DataLoader, a `keys` that is not
 * an array throws a TypeError at once (a programming error, not a failed load).
 */
export function loadEach<K, V>(
  name: string,
  keys: ArrayLike<K>,
  load: (key: K) => Promise<V>,
  options: LoadOptions | undefined,
  where: string,
): Promise<(V | Error)[]> {
  if (!isArrayLike(keys))
    throw new HerdcacheKeyError(
      `herdcache: loader "${name}": loadMany() must be called with an array of keys, got ${describe(keys)}`,
    );
  if (options !== undefined) {
    // Refused as a whole, as load() refuses them: not as one Error per key.
    try {
      checkLoadOptions(where, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }
  const loads: Promise<V | Error>[] = [];
  for (let i = 0; i < keys.length; i++)
    loads.push(load(keys[i]!).catch((error: unknown) => (isError(error) ? error : new Error(String(error)))));
  return Promise.all(loads);
}

/** Store keys remembered per loader for primitive keys. */
const KEY_MEMO_MAX = 4096;

function defaultKey(key: unknown): string {
  if (typeof key === 'string') return key;
  if (typeof key === 'number' && Number.isFinite(key)) return String(key);
  return undefined as unknown as string; // rejected by the caller with a message naming the key
}

/** The fix for a key that maps to no string, spelled out with the key's own fields where it has some. */
function keyFunctionHint(name: string, key: unknown): string {
  const fields = typeof key === 'object' && key !== null && !Array.isArray(key) ? Object.keys(key).slice(0, 3) : [];
  const example = fields.length > 0 ? `(k) => \`${fields.map((f) => `\${k.${f}}`).join(':')}\`` : '(k) => String(k.id)';
  return `DataLoader compares keys by identity, herdcache by a string (it is also the store key): pass a key function, e.g. cache.loader({ name: ${JSON.stringify(name)}, key: ${example}, batch })`;
}

export class Loader<K, V> implements Source {
  readonly name: string;
  readonly counters: Counters;
  readonly #registry: Registry;
  readonly #batch: BatchFn<K, V>;
  readonly #keyOf: (key: K) => string;
  readonly #prefix: string;
  readonly #maxBatchSize: number;
  readonly #policy: Policy;
  readonly #tags: ((key: K) => readonly string[]) | undefined;
  readonly #keyMemo = new Map<unknown, string>();
  /** This loader's policy with ttl 0: loads that must not touch the store (a scope with cache: false). */
  readonly #unstored: Policy;
  /** @internal Source: the loader's own batch window, when it has a batchScheduleFn. */
  // Optional, as Source declares it: `T | undefined` would not implement it for users compiling
  // with exactOptionalPropertyTypes and skipLibCheck false.
  readonly schedule?: BatchScheduleFn;
  /** @internal When a request scope's batch of this loader closes (its cache hits resolve with it). */
  readonly batchSchedule: BatchScheduleFn;

  /** @internal use cache.loader(...) */
  constructor(registry: Registry, options: LoaderOptions<K, V>, policy: Policy, counters: Counters) {
    if (typeof options.batch !== 'function') throw invalidOption('batch', options.batch, 'a function');
    if (options.key !== undefined && typeof options.key !== 'function')
      throw invalidOption('key', options.key, 'a function');
    this.name = options.name;
    this.counters = counters;
    this.#registry = registry;
    this.#batch = options.batch;
    this.#keyOf = options.key ?? (defaultKey as (key: K) => string);
    this.#prefix = `${options.name}:`;
    this.#maxBatchSize =
      options.maxBatchSize === undefined ? Infinity : checkPositiveInteger('maxBatchSize', options.maxBatchSize, true);
    this.#policy = policy;
    this.#unstored = storesValues(policy) ? { ...policy, ttl: 0 } : policy;
    this.schedule = checkBatchScheduleFn(options.batchScheduleFn);
    this.batchSchedule = this.schedule ?? afterPromiseJobs;
    if (options.tags !== undefined) {
      if (typeof options.tags !== 'function')
        throw invalidOption('tags', options.tags, 'a function of the key returning an array of tags');
      registry._checkTagsSupported('tags');
    }
    this.#tags = options.tags;
  }

  /** @internal Source: the tags of a key's value, checked. */
  tagsOf(key: unknown): readonly string[] | undefined {
    if (this.#tags === undefined) return undefined;
    const tags = this.#tags(key as K);
    if (!Array.isArray(tags)) ignoreRejection(tags); // an async tags function: refused below, its rejection observed
    return checkTags('tags', tags);
  }

  /** The store key of `key`: `name:key`. This is also what cache.invalidate() takes. */
  storeKey(key: K): string {
    return this._storeKey(key, undefined, this, 'storeKey()');
  }

  /**
   * @internal The key function's string for `key` (a request scope's memo key), called with
   * `holder` as `this` as DataLoader calls its cacheKeyFn. Throws HerdcacheKeyError (a TypeError).
   */
  _keyString(key: K, holder: object, method = 'load()'): string {
    if (key === null || key === undefined) {
      throw new HerdcacheKeyError(
        `herdcache: loader "${this.name}": ${method} must be called with a key, got ${String(key)}`,
      );
    }
    if (this.#keyOf === defaultKey && typeof key === 'string' && key.length > 0) return key;
    const k = this.#keyOf.call(holder, key);
    if (typeof k !== 'string' || k.length === 0) {
      ignoreRejection(k); // an async key function: refused, its rejection observed
      const hint = typeof key === 'object' && this.#keyOf === defaultKey ? `. ${keyFunctionHint(this.name, key)}` : '';
      throw new HerdcacheKeyError(
        `herdcache: loader "${this.name}" got key ${describe(key)}, which maps to ${describe(k)}; keys must map to non-empty strings${hint}`,
      );
    }
    return k;
  }

  /** @internal `name:key`, given the key's string when the caller has it already. */
  _storeKey(key: K, keyString: string | undefined, holder: object, method?: string): string {
    // Building `name:key` makes a new string that the store must hash again on every load; for
    // short primitive keys the built key is remembered (bounded: the memo is dropped when full; a
    // long key, or a short one its key function maps to a long string, is not remembered: see
    // MEMO_KEY_MAX).
    const short = typeof key === 'number' || (typeof key === 'string' && key.length <= MEMO_KEY_MAX);
    if (short) {
      const known = this.#keyMemo.get(key);
      if (known !== undefined) return known;
    }
    const storeKey = this.#prefix + (keyString ?? this._keyString(key, holder, method));
    if (short && storeKey.length <= MEMO_KEY_MAX + this.#prefix.length) {
      if (this.#keyMemo.size >= KEY_MEMO_MAX) this.#keyMemo.clear();
      this.#keyMemo.set(key, storeKey);
    }
    return storeKey;
  }

  /** One value. A key that cannot be loaded (null, undefined, unmappable) throws a TypeError at once, as DataLoader's. */
  load(key: K, options?: LoadOptions): Promise<V> {
    const storeKey = this._storeKey(key, undefined, this);
    if (options !== undefined) {
      try {
        checkLoadOptions('loader.load()', options);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this.#registry._load<V>(this, storeKey, key, this.#policy, options?.signal, undefined);
  }

  /** @internal a request scope's load: `storeKey` is known, `sink` is the scoped loader (own: see Registry._load). */
  _load(key: K, storeKey: string, signal: AbortSignal | undefined, sink: Sink): Promise<V> {
    return this.#registry._load<V>(this, storeKey, key, this.#policy, signal, sink, true);
  }

  /** @internal a scoped load with no memo and no sharing (cache: false): see Registry._loadAlone. */
  _loadAlone(key: K, storeKey: string, signal: AbortSignal | undefined, sink: Sink): Promise<V> {
    return this.#registry._loadAlone<V>(this, storeKey, key, this.#unstored, signal, sink);
  }

  /**
   * load() for resolvers that may return a value: the value itself on a hit the store answers in
   * process (the memory store, a tiered store's L1), so graphql-js completes the field without a
   * promise; otherwise load()'s promise. Counted as load() is.
   */
  read(key: K): V | Promise<V> {
    const storeKey = this._storeKey(key, undefined, this, 'read()'); // a key that cannot be loaded throws a TypeError, as load() does
    const entry = this.#registry._peek(this, storeKey, key, this.#policy, undefined);
    if (entry !== undefined) return entry.value as V;
    return this.#registry._load<V>(this, storeKey, key, this.#policy, undefined, undefined);
  }

  /** @internal the synchronous hit for a request scope (see Registry._peek). */
  _peek(storeKey: string, key: K, sink: Sink | undefined): Entry | undefined {
    return this.#registry._peek(this, storeKey, key, this.#policy, sink);
  }

  /** As DataLoader's: one entry per key, an Error where that key failed. Never rejects for a key. */
  loadMany(keys: ArrayLike<K>, options?: LoadOptions): Promise<(V | Error)[]> {
    return loadEach(this.name, keys, (key) => this.load(key, options), options, 'loader.loadMany()');
  }

  /**
   * Writes `value` for `key` into the shared store now (overwriting: the shared cache is not
   * request-scoped; DataLoader's keep-the-first `prime` is what a request scope does).
   * `undefined` and Errors are not cached.
   */
  async prime(key: K, value: V): Promise<void> {
    // A promise primes what it resolves to (as DataLoader's prime adopts it), a rejected one
    // nothing: awaited by the registry as a prime in flight (an invalidation meanwhile wins). Its
    // rejection is observed here: a prime that stores nothing (coalesce-only, a bad key) never
    // awaits it, and it must not end the process as an unhandled rejection.
    if (isThenable(value)) ignoreRejection(value);
    const storeKey = this._storeKey(key, undefined, this, 'prime()');
    if (isError(value)) return;
    await this.#registry._write(this, storeKey, value, this.#policy, this.tagsOf(key));
  }

  /** Invalidates `key` in the shared store; a fill of it in flight is not written. */
  async clear(key: K): Promise<void> {
    await this.#registry._invalidate(
      [this._storeKey(key, undefined, this, 'clear()')],
      this.name,
      storesValues(this.#policy),
    );
  }

  /** clear() for many keys at once (one store call). */
  async clearMany(keys: readonly K[]): Promise<void> {
    if (!Array.isArray(keys)) throw invalidArgument('keys', keys, 'an array');
    await this.#registry._invalidate(
      keys.map((k) => this._storeKey(k, undefined, this, 'clearMany()')),
      this.name,
      storesValues(this.#policy),
    );
  }

  /** @internal Source: batches of at most maxBatchSize keys. */
  groups(items: Item[]): Item[][] {
    const size = this.#maxBatchSize;
    if (items.length <= size) return [items];
    const groups: Item[][] = [];
    for (let i = 0; i < items.length; i += size) groups.push(items.slice(i, i + size));
    return groups;
  }

  /** @internal Source: one batch call; a broken result fails every key of the batch, caches nothing. */
  async run(items: Item[], run: FillSignal): Promise<unknown[]> {
    const keys = items.map((item) => item.arg as K);
    this.counters.batches++;
    this.counters.batchedKeys += keys.length;
    let values: ReadonlyArray<V | Error | PromiseLike<V | Error>>;
    try {
      // `this` is the loader the caller holds, as DataLoader binds it: the scoped loader of the
      // request whose key opened this batch (keys of other requests may share the call), or
      // this shared loader for direct and background loads.
      // The signal is made when read (see FillRun): most batch functions never read it.
      values = await this.#batch.call(items[0]!.sink?.holder ?? this, keys, new RunBatchContext(run));
    } catch (thrown) {
      return this.#failAll(keys.length, asError(thrown));
    }
    if (!Array.isArray(values)) {
      return this.#failAll(
        keys.length,
        new HerdcacheBatchError(
          'E_BATCH_NOT_ARRAY',
          `herdcache: loader "${this.name}": batch must return an array (or a promise of one), got ${describe(values)}`,
        ),
      );
    }
    if (values.length !== keys.length) {
      return this.#failAll(
        keys.length,
        new HerdcacheBatchError(
          'E_BATCH_LENGTH',
          `herdcache: loader "${this.name}": batch returned ${values.length} values for ${keys.length} keys; it must return one per key, in order`,
        ),
      );
    }
    const out = new Array<unknown>(values.length);
    let pending: Promise<void>[] | undefined;
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      // A promise per key (`ids.map(async (id) => …)`), as DataLoader takes it: its outcome is the
      // key's. Stored as it is, a rejected one would be served as the value until the ttl ends.
      if (isThenable(value))
        (pending ??= []).push(
          Promise.resolve(value).then(
            (settled: unknown) => void (out[i] = isError(settled) ? new Failure(settled) : settled),
            (error: unknown) => void (out[i] = new Failure(asError(error))),
          ),
        );
      else out[i] = isError(value) ? new Failure(value) : value;
    }
    if (pending !== undefined) await Promise.all(pending);
    return out;
  }

  #failAll(n: number, error: unknown): Failure[] {
    if (typeof error === 'object' && error !== null) batchFailures.add(error);
    const failure = new Failure(error);
    return new Array<Failure>(n).fill(failure);
  }
}

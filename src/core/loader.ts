/**
 * A batching loader shared by every request of the process.
 *
 * Keys asked for by all concurrent requests in one tick leave in one batch call, minus the keys
 * already cached (answered from the store) or already in flight (they join that flight). The
 * contract of `batch` is DataLoader's: same length and order as the keys; an `Error` at a
 * position fails that key only.
 */
import type { Item, Source } from './pipeline';
import { HerdcacheError, describe, invalidArgument, invalidOption } from './errors';
import { Failure, asError } from './flight';
import type { Sink } from './metrics';
import type { Entry } from './freshness';
import type { Policy } from './options';
import type { Registry } from './registry';
import { checkPositiveInteger, checkSignal, checkTags, storesValues } from './options';
import type { BatchFn, Counters, LoadOptions, LoaderOptions } from './types';

/** Errors that failed a whole batch (thrown, not an array, wrong length): a request scope forgets them. */
export const batchFailures = new WeakSet<object>();

/**
 * DataLoader's loadMany: one entry per key, an Error where that key failed; never rejects for a
 * key. Shared by the registry loader and the scoped one.
 */
export function loadEach<K, V>(keys: readonly K[], load: (key: K) => Promise<V>): Promise<(V | Error)[]> {
  if (!Array.isArray(keys)) return Promise.reject(invalidArgument('keys', keys, 'an array'));
  return Promise.all(keys.map((key) => load(key).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))))));
}

/** Store keys remembered per loader for primitive keys. */
const KEY_MEMO_MAX = 4096;

function defaultKey(key: unknown): string {
  if (typeof key === 'string') return key;
  if (typeof key === 'number' && Number.isFinite(key)) return String(key);
  return undefined as unknown as string; // rejected by the caller with a message naming the key
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

  /** @internal use cache.loader(...) */
  constructor(registry: Registry, options: LoaderOptions<K, V>, policy: Policy, counters: Counters) {
    if (typeof options.batch !== 'function') throw invalidOption('batch', options.batch, 'a function');
    if (options.key !== undefined && typeof options.key !== 'function') throw invalidOption('key', options.key, 'a function');
    this.name = options.name;
    this.counters = counters;
    this.#registry = registry;
    this.#batch = options.batch;
    this.#keyOf = options.key ?? (defaultKey as (key: K) => string);
    this.#prefix = `${options.name}:`;
    this.#maxBatchSize = options.maxBatchSize === undefined ? Infinity : checkPositiveInteger('maxBatchSize', options.maxBatchSize, true);
    this.#policy = policy;
    if (options.tags !== undefined) {
      if (typeof options.tags !== 'function') throw invalidOption('tags', options.tags, 'a function of the key returning an array of tags');
      registry._checkTagsSupported('tags');
    }
    this.#tags = options.tags;
  }

  /** @internal Source: the tags of a key's value, checked. */
  tagsOf(key: unknown): readonly string[] | undefined {
    if (this.#tags === undefined) return undefined;
    return checkTags('tags', this.#tags(key as K));
  }

  /** The store key of `key`: `name:key`. This is also what cache.invalidate() takes. */
  storeKey(key: K): string {
    // Building `name:key` makes a new string that the store must hash again on every load; for
    // primitive keys the built key is remembered (bounded: the memo is dropped when full).
    const primitive = typeof key === 'string' || typeof key === 'number';
    if (primitive) {
      const known = this.#keyMemo.get(key);
      if (known !== undefined) return known;
    }
    const storeKey = this.#buildKey(key);
    if (primitive) {
      if (this.#keyMemo.size >= KEY_MEMO_MAX) this.#keyMemo.clear();
      this.#keyMemo.set(key, storeKey);
    }
    return storeKey;
  }

  #buildKey(key: K): string {
    const k = this.#keyOf(key);
    if (typeof k !== 'string' || k.length === 0) {
      throw new HerdcacheError(
        'E_INVALID_KEY',
        `herdcache: loader "${this.name}" got key ${describe(key)}, which maps to ${describe(k)}; keys must map to non-empty strings (pass a key function for other key types)`,
      );
    }
    return this.#prefix + k;
  }

  load(key: K, options?: LoadOptions): Promise<V> {
    if (options !== undefined) {
      try {
        checkSignal(options);
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this._load(key, options?.signal, undefined);
  }

  /** @internal */
  _load(key: K, signal: AbortSignal | undefined, sink: Sink | undefined): Promise<V> {
    let storeKey: string;
    try {
      storeKey = this.storeKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#registry._load<V>(this, storeKey, key, this.#policy, signal, sink);
  }

  /**
   * load() for resolvers that may return a value: the value itself on a hit the store answers in
   * process (the memory store, a tiered store's L1), so graphql-js completes the field without a
   * promise; otherwise load()'s promise. Counted as load() is.
   */
  read(key: K): V | Promise<V> {
    let storeKey: string;
    try {
      storeKey = this.storeKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    const entry = this.#registry._peek(this, storeKey, key, this.#policy, undefined);
    if (entry !== undefined) return entry.value as V;
    return this.#registry._load<V>(this, storeKey, key, this.#policy, undefined, undefined);
  }

  /** @internal the synchronous hit for a request scope (see Registry._peek). */
  _peek(storeKey: string, key: K, sink: Sink | undefined): Entry | undefined {
    return this.#registry._peek(this, storeKey, key, this.#policy, sink);
  }

  /** As DataLoader's: one entry per key, an Error where that key failed. Never rejects for a key. */
  loadMany(keys: readonly K[], options?: LoadOptions): Promise<(V | Error)[]> {
    return loadEach(keys, (key) => this.load(key, options));
  }

  /**
   * Writes `value` for `key` into the shared store now (overwriting: the shared cache is not
   * request-scoped; DataLoader's keep-the-first `prime` is what a request scope does).
   * `undefined` and Errors are not cached.
   */
  async prime(key: K, value: V): Promise<void> {
    const storeKey = this.storeKey(key);
    if (value instanceof Error) return;
    await this.#registry._write(this, storeKey, value, this.#policy, this.tagsOf(key));
  }

  /** Invalidates `key` in the shared store; a fill of it in flight is not written. */
  async clear(key: K): Promise<void> {
    await this.#registry._invalidate([this.storeKey(key)], this.name, storesValues(this.#policy));
  }

  /** clear() for many keys at once (one store call). */
  async clearMany(keys: readonly K[]): Promise<void> {
    if (!Array.isArray(keys)) throw invalidArgument('keys', keys, 'an array');
    await this.#registry._invalidate(keys.map((k) => this.storeKey(k)), this.name, storesValues(this.#policy));
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
  async run(items: Item[], signal: AbortSignal): Promise<unknown[]> {
    const keys = items.map((item) => item.arg as K);
    this.counters.batches++;
    this.counters.batchedKeys += keys.length;
    let values: ReadonlyArray<V | Error>;
    try {
      values = await this.#batch(keys, { signal });
    } catch (thrown) {
      return this.#failAll(keys.length, asError(thrown));
    }
    if (!Array.isArray(values)) {
      return this.#failAll(
        keys.length,
        new HerdcacheError('E_BATCH_NOT_ARRAY', `herdcache: loader "${this.name}": batch must return an array (or a promise of one), got ${describe(values)}`),
      );
    }
    if (values.length !== keys.length) {
      return this.#failAll(
        keys.length,
        new HerdcacheError(
          'E_BATCH_LENGTH',
          `herdcache: loader "${this.name}": batch returned ${values.length} values for ${keys.length} keys; it must return one per key, in order`,
        ),
      );
    }
    const out = new Array<unknown>(values.length);
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      out[i] = value instanceof Error ? new Failure(value) : value;
    }
    return out;
  }

  #failAll(n: number, error: unknown): Failure[] {
    if (typeof error === 'object' && error !== null) batchFailures.add(error);
    const failure = new Failure(error);
    return new Array<Failure>(n).fill(failure);
  }
}

/**
 * A request's memo of answers, the one both kinds of memo use: a scoped loader's (keyed by its key
 * function's string, in a DataLoader cacheMap) and the request scope's own (getOrCompute and
 * @cached, keyed by the cache key). The same key gives the same answer for the rest of the request,
 * even while its load is in flight. What it holds per key (an entry answered synchronously, or a
 * load's promise, shared by callers with signals when its first caller had one), how a held answer
 * is read and forgotten, and how a load is memoized.
 */
import type { Entry } from './freshness';
import { boundedKey } from './long-keys';
import type { StoreSlot } from './store';
import { raceAbort } from './abort-race';
import { invalidArgument, invalidOption, isError } from './errors';
import { checkKnownKeys, optionNames } from './options';
import { PENDING_OR_UNKNOWN, Rejection, fulfilled, outcomeOf } from './flight';
import { batchFailures } from './loader';

/** DataLoader's cacheMap: any object with Map's get, set, delete and clear. */
export interface CacheMapLike<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): unknown;
  delete(key: K): unknown;
  clear(): unknown;
}

/**
 * One memoized load of a request whose first caller came with a signal. Each caller may leave
 * with its own signal without disturbing the others; the registry is told to stop waiting only
 * when every caller that came with a signal has left and none came without one. (A load whose
 * first caller had no signal is memoized as its promise: nothing can abandon it.) The memo holds
 * its promise, which carries it (sharedOf): a cacheMap holds promises, as DataLoader's does.
 */
export class Shared<V> {
  readonly promise: Promise<V>;
  readonly #controller = new AbortController();
  /** A caller without a signal wants the value to the end. */
  #pinned = false;
  /** Callers with a signal still waiting. */
  #waiting = 0;

  constructor(start: (signal: AbortSignal | undefined) => Promise<V>) {
    this.promise = start(this.#controller.signal);
    // Carried only by a promise of this request's own (a pending load's): a settled one may be a
    // hit's, made once per entry and handed to every request; it has nothing left to share anyway.
    if (outcomeOf(this.promise) === PENDING_OR_UNKNOWN) (this.promise as Carrier<V>)[SHARED] = this;
  }

  /** Every caller with a signal left before the value came: the registry load was abandoned. */
  get abandoned(): boolean {
    return this.#controller.signal.aborted;
  }

  join(signal: AbortSignal | undefined): Promise<V> {
    if (signal === undefined) {
      this.#pinned = true;
      return this.promise; // the same promise for every such caller, as DataLoader
    }
    if (signal.aborted) return Promise.reject(signal.reason);
    this.#waiting++;
    return raceAbort(this.promise, signal, () => {
      if (--this.#waiting === 0 && !this.#pinned) this.#controller.abort(signal.reason);
    });
  }
}

const SHARED: unique symbol = Symbol('herdcache.shared');
type Carrier<V> = Promise<V> & { [SHARED]?: Shared<V> };

/** The Shared load a memoized promise belongs to, if its first caller had a signal. */
function sharedOf<V>(promise: Promise<V>): Shared<V> | undefined {
  return (promise as Carrier<V>)[SHARED];
}

/** What a request remembers for a key: the entry it was answered from synchronously, or a load's promise. */
export type Held<V> = Entry<V> | Promise<V>;

/** A request's memo: a Map, or a scoped loader's (its own first key, then a Map; or a DataLoader cacheMap). */
export type Memo<V> = CacheMapLike<string, Held<V>>;

/** Nothing held for the key: the caller goes to the registry. */
export const NOTHING: unique symbol = Symbol('herdcache.nothing');

/**
 * What the memo holds for `key`, unless it is a load that failed in a way `forget` accepts (a
 * whole-batch failure, an abandoned load): that one is dropped here, when next looked at, rather
 * than by a handler per load, and the caller loads again.
 */
export function lookup<V>(memo: Memo<V>, key: string, forget: (error: unknown) => boolean): Held<V> | undefined {
  const held = memo.get(key);
  if (held === undefined || !forgets(held, forget)) return held;
  memo.delete(key);
  return undefined;
}

/** Whether a held answer is a load that failed in a way `forget` accepts (lookup drops it). */
export function forgets<V>(held: Held<V>, forget: (error: unknown) => boolean): boolean {
  if (!(held instanceof Promise)) return false;
  // Every caller of a shared load left (its registry load told to stop): a caller now loads anew,
  // before the load's rejection (their reason, not this caller's) reached the memo's handler.
  if (sharedOf(held)?.abandoned === true) return true;
  const outcome = outcomeOf(held);
  return outcome instanceof Rejection && forget(outcome.error);
}

/**
 * A held answer as this caller gets it: a Shared load joined with its signal, any other under its
 * signal (an aborted one rejects at once). `sync`: a value when it is known (a synchronous hit, a
 * prime, a load that has settled), else a promise; otherwise always a promise.
 */
export function answerOf<V>(held: Held<V>, signal: AbortSignal | undefined, sync: boolean): V | Promise<V> {
  if (!(held instanceof Promise)) {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return sync ? held.value : fulfilled(held);
  }
  const shared = sharedOf(held);
  if (shared !== undefined) return shared.join(signal);
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (sync) {
    const outcome = outcomeOf(held);
    if (outcome !== PENDING_OR_UNKNOWN && !(outcome instanceof Rejection)) return outcome as V;
  }
  return signal === undefined ? held : raceAbort(held, signal, ignore);
}

/** The request's answer for `key` if it has one (lookup, then answerOf); NOTHING otherwise. */
export function held<V>(
  memo: Memo<V>,
  key: string,
  signal: AbortSignal | undefined,
  forget: (error: unknown) => boolean,
  sync: boolean,
): V | Promise<V> | typeof NOTHING {
  const found = lookup(memo, key, forget);
  return found === undefined ? NOTHING : answerOf(found, signal, sync);
}

export function ignore(): void {}

/**
 * Memoizes the registry load `start` under `key` for callers with signals, which may each leave
 * (Shared): its promise is what the memo holds, forgotten once the load fails in a way `forget`
 * accepts or every caller left. Each caller joins the Shared returned.
 */
export function memoizeShared<V>(
  memo: Memo<V>,
  key: string,
  start: (signal: AbortSignal | undefined) => Promise<V>,
  forget: (error: unknown) => boolean,
): Shared<V> {
  const shared = new Shared(start);
  memo.set(key, shared.promise);
  shared.promise.catch((error: unknown) => {
    if ((shared.abandoned || forget(error)) && memo.get(key) === shared.promise) memo.delete(key);
  });
  return shared;
}

/** Memoizes the registry load `start` under `key` for the request, or joins the one it holds. */
export function memoized<V>(
  memo: Memo<V>,
  key: string,
  signal: AbortSignal | undefined,
  start: (signal: AbortSignal | undefined) => Promise<V>,
  forget: (error: unknown) => boolean,
): Promise<V> {
  const answer = held(memo, key, signal, forget, false);
  if (answer !== NOTHING) return answer as Promise<V>;
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (signal === undefined) {
    const promise = start(undefined);
    memo.set(key, promise);
    return promise;
  }
  return memoizeShared(memo, key, start, forget).join(signal);
}

/** Per-key Errors returned by a batch stay memoized (DataLoader); anything else is forgotten. */
export function forgetUnlessKeyError(error: unknown): boolean {
  return !isError(error) || batchFailures.has(error);
}

export const forgetAlways = () => true;

/** MemoKeys made so far: each gets the next number (exact in a double up to 2^53). */
let memoKeys = 0;

/**
 * @internal A key reused across requests (a @cached field's key, per parent identity), numbered
 * once, so a request can remember its synchronous answer for it in a SlotMemo instead of a Map;
 * bounded once (its form in the store); and a StoreSlot, so a store that keeps slots (the memory
 * store) answers it again without a lookup while its entry is unchanged (see Store.readSlot).
 */
export class MemoKey implements StoreSlot {
  readonly id = ++memoKeys;
  readonly stored: string;
  entry: Entry | undefined = undefined;
  stamp = 0;
  constructor(readonly key: string) {
    this.stored = boundedKey(key);
  }
}

/**
 * @internal A request's synchronous answers by MemoKey: open addressing on the key's number, in
 * plain arrays, so remembering a warm field's answer hashes no string and grows no Map (a Map per
 * request cost a warm @cached field about as much as the rest of its hit path). Never shrinks,
 * lives as long as its request.
 */
export class SlotMemo {
  /** Key at 2i, its answer at 2i + 1: one array to allocate and grow. */
  #table: (MemoKey | Entry | undefined)[] = new Array<MemoKey | Entry | undefined>(2 * SLOTS).fill(undefined);
  #mask = SLOTS - 1;
  #size = 0;

  get(memoKey: MemoKey): Entry | undefined {
    const table = this.#table;
    const mask = this.#mask;
    for (let i = memoKey.id & mask; ; i = (i + 1) & mask) {
      const at = table[2 * i];
      if (at === memoKey) return table[2 * i + 1] as Entry;
      if (at === undefined) return undefined;
    }
  }

  /** Remembers `entry` for a key not held yet (get returned undefined). */
  set(memoKey: MemoKey, entry: Entry): void {
    // Grown fourfold at 3/4 full: probes stay short, and a request of 100 warm fields grows it once.
    if (4 * (this.#size + 1) > 3 * (this.#mask + 1)) this.#grow();
    this.#insert(memoKey, entry);
    this.#size++;
  }

  #insert(memoKey: MemoKey, entry: Entry | undefined): void {
    const table = this.#table;
    const mask = this.#mask;
    let i = memoKey.id & mask;
    while (table[2 * i] !== undefined) i = (i + 1) & mask;
    table[2 * i] = memoKey;
    table[2 * i + 1] = entry;
  }

  #grow(): void {
    const table = this.#table;
    const slots = 4 * (this.#mask + 1);
    this.#table = new Array<MemoKey | Entry | undefined>(2 * slots).fill(undefined);
    this.#mask = slots - 1;
    for (let i = 0; i < table.length; i += 2) {
      const memoKey = table[i] as MemoKey | undefined;
      if (memoKey !== undefined) this.#insert(memoKey, table[i + 1] as Entry);
    }
  }
}

/** A SlotMemo's first size (a power of two). */
const SLOTS = 64;

/** DataLoader's memo options, for one scoped loader. */
export interface ScopedLoaderOptions<V> {
  /**
   * `false`: no memo, as DataLoader's `cache: false`: every load reaches the batch function, even
   * a key repeated in one tick, and bypasses the shared store and cross-request single-flight
   * (joining another request's fill would be a memo by another name). Default true.
   */
  cache?: boolean;
  /** The memo, keyed by the key function's string: a Map-like of promises, or `null` for none (= `cache: false`). Default `new Map()`. */
  cacheMap?: CacheMapLike<string, Promise<V>> | null;
}

const MEMO_METHODS = ['get', 'set', 'delete', 'clear'] as const;

const SCOPED_LOADER_OPTIONS = optionNames<ScopedLoaderOptions<unknown>>({ cache: true, cacheMap: true });

/** The memo a scoped loader's options ask for: undefined for the default (see ScopedLoader.#memo). */
export function memoOf<V>(
  options: ScopedLoaderOptions<V> | undefined,
): CacheMapLike<string, Promise<V>> | null | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
  checkKnownKeys('scope.loader()', options, SCOPED_LOADER_OPTIONS);
  const { cache, cacheMap } = options;
  if (cache !== undefined && typeof cache !== 'boolean') throw invalidOption('cache', cache, 'a boolean');
  if (cache === false || cacheMap === null) return null;
  if (cacheMap === undefined) return undefined;
  const missing = MEMO_METHODS.filter(
    (m) => typeof (cacheMap as unknown as Record<string, unknown> | undefined)?.[m] !== 'function',
  );
  if (missing.length > 0)
    throw invalidOption(
      'cacheMap',
      cacheMap,
      `null or an object with get, set, delete and clear (missing: ${missing.join(', ')})`,
    );
  return cacheMap;
}

/**
 * A registry loader as one request sees it: DataLoader's per-request semantics (memo, prime,
 * clear, cacheMap, cache: false, cache hits resolved with the pending batch), with the registry's
 * single-flight and batching across requests underneath.
 */
import type { Entry } from './freshness';
import { isError } from './errors';
import { fulfilled, rejected } from './flight';
import { ownPending } from './outcome';
import { raceAbort } from './abort-race';
import { type Loader, loadEach } from './loader';
import { checkLoadOptions } from './options';
import type { CounterName, PendingJoin, Sink, TagNotes } from './metrics';
import {
  type CacheMapLike,
  type Memo,
  type ScopedLoaderOptions,
  answerOf,
  forgetUnlessKeyError,
  forgets,
  ignore,
  memoOf,
  memoizeShared,
} from './memo';
import { type BatchScheduleFn, afterPromiseJobs, scheduleOnce } from './tick';
import type { LoadOptions } from './types';

export type { CacheMapLike, ScopedLoaderOptions } from './memo';

/**
 * The tick a load belongs to: a number bumped once per tick for the whole process (one scheduled
 * job per tick, however many request scopes load in it), so a scoped loader can tell "the loads of
 * this tick" apart without scheduling anything of its own.
 */
let tick = 0;
let tickEnding = false;

function endTick(): void {
  tick++;
  tickEnding = false;
}

function currentTick(): number {
  if (!tickEnding) {
    tickEnding = true;
    afterPromiseJobs(endTick);
  }
  return tick;
}

/**
 * The memo hits of one scoped loader in one tick, waiting for the loads of that tick (DataLoader's
 * pending batch): they are answered when the batch leaves (the loader's schedule) and its loads
 * have settled, so a request's cached and uncached values arrive together and the loads they lead
 * to share the next batch, as in DataLoader >= 2.1. Made only when a hit happens: loads pay an
 * array push each, no handler and no scheduling.
 */
class PendingHits {
  released = false;
  readonly #answers: (() => void)[] = [];

  /** `loads`: the tick's loads so far; those noted after it (before the batch leaves) are pushed to it. */
  constructor(
    schedule: BatchScheduleFn,
    readonly loads: Promise<unknown>[],
  ) {
    scheduleOnce(schedule, () => {
      if (loads.length === 0) this.#release();
      else void Promise.allSettled(loads).then(this.#release);
    });
  }

  /** `signal`: the caller's; it leaves at once when it fires, not when the batch has settled. */
  wait<V>(answer: Promise<V>, signal: AbortSignal | undefined): Promise<V> {
    if (this.released) return answer.then(passThrough); // a scheduler that called back at once
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    const held = new Promise<V>((resolve) => this.#answers.push(() => resolve(answer)));
    // One listener per signal however many hits wait under it (raceAbort's, ./abort-race).
    return signal === undefined ? held : raceAbort(held, signal, ignore);
  }

  readonly #release = (): void => {
    this.released = true;
    for (const answer of this.#answers) answer();
  };
}

function passThrough<V>(value: V): V {
  return value;
}

/**
 * @internal What a scoped loader needs of its request scope (RequestScope, scope.ts, has it; not
 * named in its `implements`, so the published types, where this is stripped, never mention it):
 * declared here so the arrow points one way, scope → scoped loader.
 */
export interface LoaderScope {
  /** The request's signal (cache.request({ signal })), undefined when none. */
  readonly signal: AbortSignal | undefined;
  /** The signal a load with its own `signal` option waits under: its own and the request's. */
  _signal(own: AbortSignal | undefined): AbortSignal | undefined;
  /** Counts go to the request's stats. */
  count(source: string, counter: CounterName, n: number): void;
  /** So do the flights joined before their outcome was known (Sink.joined). */
  joined(join: PendingJoin): void;
  /** And the oldest flight joined (Sink.joinedFlight). */
  joinedFlight(seq: number): void;
  /** Where the tags of the values this request loads go (RequestScope._tags), if anywhere. */
  readonly _tags: TagNotes | undefined;
}

export class ScopedLoader<K, V> implements Sink {
  readonly #loader: Loader<K, V>;
  readonly #scope: LoaderScope;
  /**
   * The request memo (memo.ts): key string → the promise of its load (recorded: see outcomeOf;
   * a Shared one when its first caller had a signal). The default one holds its first key here
   * (#key, #held: most scoped loaders of a request hold one, every request of a stampede does, and
   * a Map costs ~200 bytes at once) while #memo is undefined, then a Map; a cacheMap given is used
   * as it is; null: none.
   */
  #memo: CacheMapLike<string, Promise<V>> | null | undefined;
  #key: string | undefined = undefined;
  #held: Promise<V> | undefined = undefined;
  /** The tick of `#loads`. */
  #tick = -1;
  /**
   * This tick's loads that went to the registry (a pending hit waits for them): the first held as
   * itself, as most scoped loaders of a request load one key per tick (every request of a stampede
   * does); an array from a second load; after a memo hit, the PendingHits that holds that array
   * (one field for both: every field is 8 bytes of every request's scoped loader).
   */
  #loads: Promise<unknown> | Promise<unknown>[] | PendingHits | undefined = undefined;

  /** @internal use scope.loader(loader, options?) */
  constructor(loader: Loader<K, V>, scope: LoaderScope, options?: ScopedLoaderOptions<V>) {
    this.#loader = loader;
    this.#scope = scope;
    this.#memo = memoOf(options);
  }

  get name(): string {
    return this.#loader.name;
  }

  /** @internal The registry loader this is a view of (RequestScope.loader finds its view by it). */
  get _loader(): Loader<K, V> {
    return this.#loader;
  }

  /** @internal Sink: batch and key functions get this scoped loader as `this`. */
  get holder(): object {
    return this;
  }

  /** @internal Sink: counts go to the request's stats. */
  count(source: string, counter: CounterName, n: number): void {
    this.#scope.count(source, counter, n);
  }

  /** @internal Sink */
  joined(join: PendingJoin): void {
    this.#scope.joined(join);
  }

  /** @internal Sink */
  joinedFlight(seq: number): void {
    this.#scope.joinedFlight(seq);
  }

  /**
   * One value, memoized for the request. As DataLoader's: null or undefined (and here, a key the
   * key function maps to no string) throws a TypeError at once; a cache hit resolves together with
   * the batch pending in this tick; a rejection nobody handles is an unhandled rejection.
   */
  load(key: K, options?: LoadOptions): Promise<V> {
    const keyString = this.#loader._keyString(key, this);
    let signal = this.#scope.signal;
    if (options !== undefined) {
      try {
        checkLoadOptions('scopedLoader.load()', options);
      } catch (error) {
        return Promise.reject(error);
      }
      signal = this.#scope._signal(options.signal);
    }
    const cached = this._lookup(keyString);
    if (this.#scope._tags !== undefined && cached === undefined) this._noteTags(key);
    if (cached !== undefined) {
      // Joined now (a caller without a signal pins the load at once), handed over with the batch.
      const answer = answerOf(cached, signal, false) as Promise<V>;
      if (answer !== cached) answer.catch(ignore); // reported through the promise this caller gets
      return this._afterPendingBatch(answer, signal);
    }
    return this._miss(key, keyString, signal);
  }

  /**
   * load() for resolvers that may return a value: the value itself when this request already
   * has it or the store holds it fresh in process (the memory store, a tiered store's L1), so
   * graphql-js completes the field without a promise; otherwise load()'s promise. Counted as
   * load() is, and the same answer within the request. (Unlike load(), a hit does not wait for
   * the pending batch: that is the point of read.)
   */
  read(key: K): V | Promise<V> {
    const keyString = this.#loader._keyString(key, this, 'read()');
    if (this.#memo === null) return this.load(key);
    // Settled: its value; pending: its promise, which the request's signal (if any) still ends.
    const cached = this._lookup(keyString);
    if (cached !== undefined) return answerOf(cached, this.#scope.signal, true);
    if (this.#scope._tags !== undefined) this._noteTags(key);
    const storeKey = this.#loader._storeKey(key, keyString, this);
    const entry = this.#loader._peek(storeKey, key, this);
    if (entry !== undefined) {
      this._set(keyString, fulfilled(entry as Entry<V>));
      return entry.value as V;
    }
    return this._miss(key, keyString, this.#scope.signal);
  }

  /** As DataLoader's: values and Errors in order, never rejects for a key; a non-array throws a TypeError. */
  loadMany(keys: ArrayLike<K>, options?: LoadOptions): Promise<(V | Error)[]> {
    return loadEach(this.name, keys, (key) => this.load(key, options), options, 'scopedLoader.loadMany()');
  }

  /** Request-local: keeps an existing entry, as DataLoader's prime. An Error primes a rejection. */
  prime(key: K, value: V | Error): this {
    if (this.#memo === null) return this;
    const keyString = this.#loader._keyString(key, this, 'prime()');
    if (this._lookup(keyString) === undefined) this._set(keyString, primed(value));
    return this;
  }

  /** Request-local: forgets the memo for `key` (use loader.clear to invalidate the shared cache). */
  clear(key: K): this {
    this._delete(this.#loader._keyString(key, this, 'clear()'));
    return this;
  }

  clearAll(): this {
    const memo = this.#memo;
    if (memo === undefined) this.#key = this.#held = undefined;
    else memo?.clear();
    return this;
  }

  // The methods from here on are TypeScript-private, not #private: a #method gives every instance a
  // brand slot (8 bytes of every request's scoped loader; a stampede makes one per load).

  /** @internal The key's tags to the request's notes (LoaderScope._tags); a tags function that throws: the miss reports it. */
  private _noteTags(key: K): void {
    let tags: readonly string[] | undefined;
    try {
      tags = this.#loader.tagsOf(key);
    } catch {
      return;
    }
    if (tags !== undefined && tags.length > 0) this.#scope._tags!.noteTags(tags);
  }

  /** @internal The memo's promise for `key`, unless it failed in a way DataLoader forgets (dropped here: see memo.ts lookup). */
  private _lookup(key: string): Promise<V> | undefined {
    const held = this._get(key);
    if (held === undefined || !forgets(held, forgetUnlessKeyError)) return held;
    this._delete(key);
    return undefined;
  }

  /** @internal */
  private _get(key: string): Promise<V> | undefined {
    const memo = this.#memo;
    if (memo !== undefined) {
      const held = memo?.get(key);
      // A cacheMap the user filled may hold a value, not a promise (DataLoader hands it back as it is).
      return held === undefined || held instanceof Promise ? held : (Promise.resolve(held) as Promise<V>);
    }
    return key === this.#key ? this.#held : undefined;
  }

  /** @internal */
  private _set(key: string, value: Promise<V>): void {
    const memo = this.#memo;
    if (memo !== undefined) memo?.set(key, value);
    else if (this.#key === undefined || this.#key === key) {
      this.#key = key;
      this.#held = value;
    } else {
      this.#memo = new Map([
        [this.#key, this.#held!],
        [key, value],
      ]);
      this.#key = this.#held = undefined;
    }
  }

  /** @internal */
  private _delete(key: string): void {
    const memo = this.#memo;
    if (memo !== undefined) memo?.delete(key);
    else if (key === this.#key) this.#key = this.#held = undefined;
  }

  /** @internal The memo as memo.ts takes it (for a load shared by callers with signals, a rare path). */
  private _asMemo(): Memo<V> {
    return {
      get: (key) => this._get(key),
      set: (key, value) => this._set(key, value as Promise<V>),
      delete: (key) => this._delete(key),
      clear: () => this.clearAll(),
    };
  }

  /** @internal */
  private _miss(key: K, keyString: string, signal: AbortSignal | undefined): Promise<V> {
    const loader = this.#loader;
    const storeKey = loader._storeKey(key, keyString, this);
    if (this.#memo === null) {
      const alone = loader._loadAlone(key, storeKey, signal, this);
      this._noteLoad(alone);
      return alone.then(passThrough);
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (signal === undefined) {
      // The memo's promise (recorded, so the memo can read its outcome) is this caller's own, as
      // DataLoader's: unhandled if nobody handles it. The registry makes one when this load starts
      // the key's flight (ownPending); a hit's or a joined flight's is shared by every caller of
      // the key, and this caller gets a promise of its own from it (then() without a handler: the
      // promise jobs settle it without calling a function).
      const promise = loader._load(key, storeKey, undefined, this);
      this._set(keyString, promise);
      this._noteLoad(promise);
      return ownPending(promise) ? promise : promise.then();
    }
    return this._missWithSignal(key, keyString, storeKey, signal);
  }

  /** @internal _miss with a signal, apart: its closures would make every call of _miss allocate their context. */
  private _missWithSignal(key: K, keyString: string, storeKey: string, signal: AbortSignal): Promise<V> {
    const loader = this.#loader;
    const shared = memoizeShared<V>(
      this._asMemo(),
      keyString,
      (s) => loader._load(key, storeKey, s, this),
      forgetUnlessKeyError,
    );
    this._noteLoad(shared.promise);
    return shared.join(signal);
  }

  /** @internal */
  private _enterTick(): void {
    const now = currentTick();
    if (this.#tick !== now) {
      this.#tick = now;
      this.#loads = undefined;
    }
  }

  /** @internal */
  private _noteLoad(load: Promise<unknown>): void {
    this._enterTick();
    const loads = this.#loads;
    if (loads === undefined) this.#loads = load;
    else if (Array.isArray(loads)) loads.push(load);
    else if (loads instanceof PendingHits) loads.loads.push(load);
    else this.#loads = [loads, load];
  }

  /** @internal A memo hit's answer, handed over with this tick's batch (see PendingHits). */
  private _afterPendingBatch<W>(answer: Promise<W>, signal: AbortSignal | undefined): Promise<W> {
    this._enterTick();
    const held = this.#loads;
    if (held instanceof PendingHits && !held.released) return held.wait(answer, signal);
    const loads =
      held instanceof PendingHits ? held.loads : Array.isArray(held) ? held : held === undefined ? [] : [held];
    const hits = new PendingHits(this.#loader.batchSchedule, loads);
    this.#loads = hits;
    return hits.wait(answer, signal);
  }
}

/** What a scoped loader's prime() holds: a settled promise, recorded (an Error primes a rejection nobody is told of). */
function primed<V>(value: V | Error): Promise<V> {
  if (!isError(value)) return fulfilled<V>({ value, freshUntil: Infinity, staleUntil: Infinity });
  const promise = rejected<V>(value);
  promise.catch(ignore);
  return promise;
}

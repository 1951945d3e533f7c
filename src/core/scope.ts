/**
 * The per-request view. Within one operation the same key gives the same answer (the memo
 * holds the first promise), even if the shared entry is refreshed mid-request; underneath,
 * loads go through the registry, so concurrent requests still share fills and batches.
 *
 * `load`, `loadMany`, `prime`, `clear` and `clearAll` of a scoped loader behave as DataLoader
 * documents: prime keeps an existing entry, clear forgets the request's memo only, a key that
 * failed inside a batch result stays failed for the request, and a whole-batch failure is
 * forgotten so the next load retries.
 */
import { invalidArgument } from './errors';
import { Loader } from './loader';
import { type Memo, type MemoKey, NOTHING, SlotMemo, forgetAlways, held, memoized } from './memo';
import { isNamespacedKey, reservedKeyError } from './namespaces';
import { checkGetOrComputeKeys, checkSignal } from './options';
import { type CounterName, type PendingJoin, RequestCounters, type Sink, type TagNotes } from './metrics';
import { type Computation, NO_ARG, type Registry } from './registry';
import { ScopedLoader, type ScopedLoaderOptions } from './scoped-loader';
import type { Fill, GetOrComputeOptions, LoadOptions, MetricsSnapshot } from './types';

export { ScopedLoader, type CacheMapLike, type ScopedLoaderOptions } from './scoped-loader';

export class RequestScope implements Sink {
  readonly #registry: Registry;
  /** The first loader's view (scope.loader without options): most requests of a stampede use one loader. */
  #first: ScopedLoader<unknown, unknown> | undefined;
  /**
   * The request's memo of getOrCompute and @cached answers, by cache key (a string), and its views
   * of the loaders after the first, by loader (an object, never a cache key): one Map for both,
   * made on first use (every field is 8 bytes of every request).
   */
  #keyed: Map<unknown, unknown> | undefined;
  /** Synchronous answers for MemoKeys (the @cached fields' keys), made on the first. */
  #slots: SlotMemo | undefined;
  #stats: RequestCounters | undefined;
  /**
   * The flights this request joined before their outcome was known (Sink.joined), counted into
   * #stats when they are read: one held as itself, more in an array (compacted as it grows).
   */
  #joins: PendingJoin | PendingJoin[] | undefined;
  /** The request's signal (cache.request({ signal })): every load of the request waits under it. */
  readonly signal: AbortSignal | undefined;
  /**
   * @internal Where the tags of the values this request loads (loaders' `tags`, getOrCompute's
   * `tags`) are noted: an operation's state (graphql/request), whose whole response is tagged with them.
   */
  _tags: TagNotes | undefined = undefined;
  /** The oldest flight (Flight.seq) this request's loads joined. */
  #oldestJoin = Infinity;

  /** @internal use cache.request() */
  constructor(registry: Registry, signal: AbortSignal | undefined) {
    this.#registry = registry;
    this.signal = signal;
  }

  /** @internal The signal a load of this request waits under: its own, the request's, or either. */
  _signal(own: AbortSignal | undefined): AbortSignal | undefined {
    const request = this.signal;
    if (request === undefined || own === request) return own;
    return own === undefined ? request : AbortSignal.any([own, request]);
  }

  /**
   * The request's view of a registry loader: without options, the scope's one view, created on
   * first use; with DataLoader's memo options (`cache`, `cacheMap`), a new view of its own, as
   * each `new DataLoader(...)` is a new instance.
   */
  loader<K, V>(loader: Loader<K, V>, options?: ScopedLoaderOptions<V>): ScopedLoader<K, V> {
    if (options !== undefined) return new ScopedLoader(checked(loader), this, options);
    const key = loader as Loader<unknown, unknown>;
    const first = this.#first;
    // The first view's loader passed the check when its view was made: not checked again. The
    // others are checked before the lookup: #keyed also holds getOrCompute answers by key string.
    if (first === undefined) return (this.#first = new ScopedLoader(checked(key), this)) as ScopedLoader<K, V>;
    if (first._loader === key) return first as ScopedLoader<K, V>;
    checked(key);
    const keyed = (this.#keyed ??= new Map());
    let scoped = keyed.get(key) as ScopedLoader<unknown, unknown> | undefined;
    if (scoped === undefined) {
      scoped = new ScopedLoader(key, this);
      keyed.set(key, scoped);
    }
    return scoped as ScopedLoader<K, V>;
  }

  load<K, V>(loader: Loader<K, V>, key: K, options?: LoadOptions): Promise<V> {
    return this.loader(loader).load(key, options);
  }

  /** getOrCompute, memoized for this request and attributed to its stats. Failures are not memoized. */
  getOrCompute<V>(key: string, fill: Fill<V>, options?: GetOrComputeOptions): Promise<V> {
    try {
      // Before the memo: it also holds this request's @cached answers, under their own keys.
      if (typeof key === 'string' && isNamespacedKey(key)) throw reservedKeyError('key', key);
      checkSignal(options);
      if (options !== undefined) checkGetOrComputeKeys('scope.getOrCompute()', options);
    } catch (error) {
      return Promise.reject(error);
    }
    const computed = (this.#keyed ??= new Map()) as Memo<V>;
    const tags = options?.tags;
    if (this._tags !== undefined && Array.isArray(tags) && tags.length > 0) this._tags.noteTags(tags);
    const signal = this._signal(options?.signal);
    return memoized(
      computed,
      key,
      signal,
      (shared) =>
        this.#registry._getOrCompute<V>(
          key,
          fill,
          shared === undefined ? options : { ...options, signal: shared },
          this,
        ),
      forgetAlways,
    );
  }

  /**
   * @internal The @cached directive's hit path: this request's earlier answer for `key`, or the
   * value of a fresh entry held in process; NOTHING otherwise (the directive then makes its fill
   * and calls _compute). Nothing is allocated for a field until it must be.
   */
  _read(computation: Computation, key: string): unknown {
    const computed = this.#keyed as Memo<unknown> | undefined;
    if (computed !== undefined) {
      const answer = held(computed, key, this.signal, forgetAlways, true);
      if (answer !== NOTHING) return answer;
    }
    const entry = this.#registry._peek(computation.source, key, NO_ARG, computation.policy, this);
    if (entry === undefined) return NOTHING;
    (this.#keyed ??= new Map()).set(key, entry);
    return entry.value;
  }

  /**
   * @internal _read for a MemoKey (a @cached field's key, reused across requests): the same
   * answers, a synchronous hit remembered in the request's SlotMemo rather than in a Map.
   */
  _readKey(computation: Computation, memoKey: MemoKey): unknown {
    const slots = this.#slots;
    if (slots !== undefined) {
      const entry = slots.get(memoKey);
      if (entry !== undefined) {
        const signal = this.signal;
        return signal?.aborted ? Promise.reject(signal.reason) : entry.value;
      }
    }
    const computed = this.#keyed as Memo<unknown> | undefined;
    if (computed !== undefined) {
      const answer = held(computed, memoKey.key, this.signal, forgetAlways, true);
      if (answer !== NOTHING) return answer;
    }
    const entry = this.#registry._peek(computation.source, memoKey.key, NO_ARG, computation.policy, this, memoKey);
    if (entry === undefined) return NOTHING;
    (slots ?? (this.#slots = new SlotMemo())).set(memoKey, entry);
    return entry.value;
  }

  /** @internal The directive's miss: getOrCompute with its computation resolved at build time. */
  _compute<V>(computation: Computation, key: string, fill: Fill<V>): Promise<V> {
    const computed = (this.#keyed ??= new Map()) as Memo<V>;
    return memoized(
      computed,
      key,
      this.signal,
      (signal) => this.#registry._load<V>(computation.source, key, fill, computation.policy, signal, this),
      forgetAlways,
    );
  }

  /** What this request's loads did: hits, misses, coalesced, fills… per source. */
  stats(): MetricsSnapshot {
    if (this.#joins !== undefined) this.#joins = countJoins(this.#joins, this);
    return (this.#stats ??= new RequestCounters()).snapshot();
  }

  /** @internal stats().total[counter], without the snapshot (the response layer asks it of every miss). */
  _total(counter: CounterName): number {
    if (this.#joins !== undefined) this.#joins = countJoins(this.#joins, this);
    return this.#stats === undefined ? 0 : this.#stats.total(counter);
  }

  /** @internal Sink */
  count(source: string, counter: CounterName, n: number): void {
    (this.#stats ??= new RequestCounters()).count(source, counter, n);
  }

  /** @internal Sink: the oldest flight this request's loads joined (see _joinedBefore). */
  joinedFlight(seq: number): void {
    if (seq < this.#oldestJoin) this.#oldestJoin = seq;
  }

  /**
   * @internal Whether a load of this request joined a flight started by the `seq`-th flight or
   * before (a fill in flight since before then: its value may predate what happened since).
   */
  _joinedBefore(seq: number): boolean {
    return this.#oldestJoin <= seq;
  }

  /** @internal Sink: counted when the stats are read, by the flight's outcome (if known by then). */
  joined(join: PendingJoin): void {
    let joins = this.#joins;
    if (joins === undefined) this.#joins = join;
    else if (!Array.isArray(joins)) this.#joins = [joins, join];
    else {
      // Counted as the array doubles, so a long request holds only the flights still undecided.
      const n = joins.length;
      if (n >= 64 && (n & (n - 1)) === 0) joins = countJoins(joins, this);
      if (joins === undefined) this.#joins = join;
      else (joins as PendingJoin[]).push(join);
    }
  }
}

/**
 * `loader`, if it is a loader: anything else would fail its first load with a bare TypeError. A
 * loader of another cache is one: its loads go through that cache, memoized for this request.
 * (A function, not a private method: see countJoins.)
 */
function checked<K, V>(loader: Loader<K, V>): Loader<K, V> {
  if (!(loader instanceof Loader)) throw invalidArgument('loader', loader, 'a loader made by cache.loader(...)');
  return loader;
}

/**
 * Counts into `scope` the joined flights whose outcome is known and returns the others. (A
 * function, not a private method: one would give every RequestScope a brand slot.)
 */
function countJoins(joins: PendingJoin | PendingJoin[], scope: Sink): PendingJoin | PendingJoin[] | undefined {
  if (!Array.isArray(joins)) {
    if (joins.joinedAs === undefined) return joins;
    scope.count(joins.joinSource!.name, joins.joinedAs, 1);
    return undefined;
  }
  let kept = 0;
  for (const join of joins) {
    if (join.joinedAs !== undefined) scope.count(join.joinSource!.name, join.joinedAs, 1);
    else joins[kept++] = join;
  }
  joins.length = kept;
  return kept === 0 ? undefined : joins;
}

/** What RequestScope._read returns when it has no answer without a load. */
export { NOTHING as NO_ANSWER };

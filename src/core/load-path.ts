/**
 * The load path of a registry: a hit answered from the store's synchronous read, else the key's
 * flight joined, else a flight started and queued for the tick's dispatch (the miss pipeline);
 * stale values served while one background refresh runs; every outcome counted once.
 */
import { HerdcacheError } from './errors';
import { Flight, fulfilled, rejected } from './flight';
import type { FlightTable } from './flight-table';
import { type Clock, type Entry, refreshEarly } from './freshness';
import { type Observers, notify } from './hooks';
import { type Sink, type Tally, countOn } from './metrics';
import type { Policy } from './options';
import type { Item, Source } from './item';
import { FillPipeline, type PipelineHost } from './pipeline';
import { NO_ARG } from './registry';
import type { Store } from './store';
import { DispatchQueue, nextTurn } from './tick';
import { tagsFor } from './validity';

export interface LoadPathOptions extends Omit<PipelineHost, 'settled' | 'refresh'> {
  readonly store: Store;
  readonly clock: Clock;
  /** What a hit's freshness is judged by: the registry's CoarseClock by default, else `clock` itself. */
  readonly hitClock: Clock;
  readonly flights: FlightTable;
  readonly observers: Observers;
  /** Most background refreshes at once; more are dropped. */
  readonly maxRefreshes: number;
}

export class LoadPath {
  /** The miss pipeline: store reads, fill locks, fills and writes for the keys queued here. */
  readonly #pipeline: FillPipeline;
  /** Set by the registry's close(): later misses are refused. */
  closed = false;
  readonly #store: Store;
  /** Whether the store reads synchronously (memory, tiered L1): a load then tries a hit first. */
  readonly #syncReads: boolean;
  /** Whether it has peekSync (getSync leaving servedUntil to the registry's clock read). */
  readonly #peeks: boolean;
  /** A hit's clock (see LoadPathOptions.hitClock); the pipeline reads the exact one. */
  readonly #clock: Clock;
  readonly #flights: FlightTable;
  readonly #observers: Observers;
  readonly #maxRefreshes: number;
  /** Items waiting for their dispatch into the pipeline. */
  readonly #queue: DispatchQueue<Source, Item>;
  #refreshing = 0;

  constructor(options: LoadPathOptions) {
    const { store, hitClock, flights, observers, maxRefreshes } = options;
    // Called as the store's method, not through a bound copy: a bound function is called through a
    // generic builtin the compiler does not inline (~30 ns of every hit).
    this.#store = store;
    this.#syncReads = typeof store.getSync === 'function';
    this.#peeks = this.#syncReads && typeof store.peekSync === 'function';
    this.#clock = hitClock;
    this.#flights = flights;
    this.#observers = observers;
    this.#maxRefreshes = maxRefreshes;
    this.#pipeline = new FillPipeline({
      ...options,
      settled: (item, counter, tally) => this.settled(item, counter, tally),
      refresh: (source, key, arg, policy, replacing) => this.refresh(source, key, arg, policy, replacing),
    });
    this.#queue = new DispatchQueue((items) => void this.#pipeline.dispatch(items));
  }

  /**
   * A load: hit, else join the key's flight, else start one. With a synchronous store a hit costs
   * one map lookup, one clock read and no allocation: the entry's settled promise is made once.
   */
  load<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    own = false,
  ): Promise<V> {
    const entry = this.peek(source, key, arg, policy, sink);
    if (entry !== undefined) return fulfilled(entry) as Promise<V>;
    return this.#miss<V>(source, key, arg, policy, signal, sink, false, own);
  }

  /** The synchronous hit (see Registry._peek). */
  peek(source: Source, key: string, arg: unknown, policy: Policy, sink: Sink | undefined): Entry | undefined {
    // A coalesce-only policy (ttl 0) never reads the store: it only joins or starts a flight.
    if (!this.#syncReads || policy.ttl === 0) return undefined;
    const entry = this.#peeks ? this.#store.peekSync!(key) : this.#store.getSync!(key);
    if (entry === undefined) return undefined;
    // A fresh entry without an early refresh to draw: a hit. Kept this small so it inlines into
    // the caller's hit path; every other case (and the clock reading it took) goes to #answer.
    if (entry.servedUntil === undefined && policy.beta === 0) {
      const freshUntil = entry.freshUntil;
      const now = freshUntil === Infinity ? 0 : this.#clock.now();
      if (now < freshUntil) {
        this.#hit(source, key, sink);
        return entry;
      }
      return this.#answer(source, key, entry, arg, policy, sink, false, now);
    }
    return this.#answer(source, key, entry, arg, policy, sink, false, undefined);
  }

  /**
   * Answers from an entry found by a synchronous read: fresh → hit; stale within grace → served
   * at once and one background refresh scheduled; expired → undefined (a miss, not counted here).
   */
  #answer(
    source: Source,
    key: string,
    entry: Entry,
    arg: unknown,
    policy: Policy,
    sink: Sink | undefined,
    counted: boolean,
    /** The hit clock's reading when the caller took one already. */
    read: number | undefined,
  ): Entry | undefined {
    const freshUntil = entry.freshUntil;
    const servedUntil = entry.servedUntil;
    if (freshUntil === Infinity && servedUntil === undefined) {
      if (!counted) this.#hit(source, key, sink);
      return entry;
    }
    const now = read ?? this.#clock.now();
    // A copy past what its store allows (peekSync): not there, a miss the store's async read answers.
    if (servedUntil !== undefined && !(now < servedUntil)) return undefined;
    if (now < freshUntil) {
      if (policy.beta > 0) {
        // Without an arg no refresh can start here, and drawing twice (here, then on the
        // caller's load path) would change the odds: the load path draws, once.
        if (arg === NO_ARG) return undefined;
        if (refreshEarly(entry, now, policy.beta)) this.refresh(source, key, arg, policy, entry);
      }
      if (!counted) this.#hit(source, key, sink);
      return entry;
    }
    if (now < entry.staleUntil && arg !== NO_ARG) {
      if (!counted) this.record(source, 'staleServed', key, sink);
      this.refresh(source, key, arg, policy, entry);
      return entry;
    }
    return undefined;
  }

  /** A caller re-contending after its flight was abandoned: its load was counted when it arrived. */
  #again<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
  ): Promise<V> {
    const entry =
      policy.ttl === 0 || !this.#syncReads
        ? undefined
        : this.#peeks
          ? this.#store.peekSync!(key)
          : this.#store.getSync!(key);
    const answer =
      entry === undefined ? undefined : this.#answer(source, key, entry, arg, policy, sink, true, undefined);
    if (answer !== undefined) return fulfilled(answer) as Promise<V>;
    return this.#miss<V>(source, key, arg, policy, signal, sink, true);
  }

  /** Joins the key's flight, or starts one and queues it for the next dispatch (own: see Registry._load). */
  #miss<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    counted: boolean,
    own = false,
  ): Promise<V> {
    if (this.closed) return rejected(new HerdcacheError('E_CLOSED', 'herdcache: the cache is closed'));
    if (signal?.aborted) return rejected(signal.reason);
    let flight = this.#flights.get(key);
    if (flight !== undefined) {
      const replacing = flight.replacing;
      if (replacing !== undefined) {
        // A background refresh runs (an async store found the value stale, or due for early
        // refresh): answer with the value it replaces while that value may still be served.
        const now = this.#clock.now();
        if (now < replacing.staleUntil) {
          if (!counted) {
            if (now < replacing.freshUntil) this.#hit(source, key, sink);
            else this.record(source, 'staleServed', key, sink);
          }
          return fulfilled(replacing) as Promise<V>;
        }
      }
      if (!counted) this.#join(flight, source, key, sink);
    } else {
      let tags: readonly string[] | undefined;
      try {
        tags = tagsFor(source, arg, policy);
      } catch (error) {
        return rejected(error);
      }
      flight = this.#flights.start(key, false, tags);
      if (policy.lateTags === true) flight.lateTags = true;
      const item: Item = { source, key, flight, arg, policy, sink, tags, counted };
      this.#queue.enqueue(item);
      // The starter shares (or owns) first: its retry is made of its Item (no closure per key).
      if (signal === undefined)
        return (own ? flight.own(this.#retryItem, item) : flight.share(this.#retryItem, item)) as Promise<V>;
      return this.#wait<V>(flight, source, key, arg, policy, signal, sink, true);
    }
    if (signal !== undefined) return this.#wait<V>(flight, source, key, arg, policy, signal, sink);
    flight.joinedBy(source, arg, policy);
    return (flight.join() as Promise<V> | undefined) ?? this.#wait<V>(flight, source, key, arg, policy, signal, sink);
  }

  // The retry is made here, not in #miss (where every call would allocate its context, ~90 bytes):
  // a waiter whose flight is abandoned starts over (the store may hold a value now), counted once;
  // its starter (with a signal) a turn after the others: its fill may be the stuck one (#retryItem).
  #wait<V>(
    flight: Flight,
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    starter = false,
  ): Promise<V> {
    const again = starter
      ? () => nextTurn().then(() => this.#again<V>(source, key, arg, policy, signal, sink))
      : () => this.#again<V>(source, key, arg, policy, signal, sink);
    return (
      signal === undefined ? flight.share(again, undefined) : flight.joinWithSignal(signal, this.#abandonLeft, again)
    ) as Promise<V>;
  }

  /**
   * One load that neither joins nor starts a shared flight and never touches the store
   * (a scoped loader with `cache: false`, as DataLoader's): its key reaches the batch function,
   * batched with the tick's other keys, even when the same key is already in flight.
   */
  loadAlone<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
  ): Promise<V> {
    if (this.closed) return rejected(new HerdcacheError('E_CLOSED', 'herdcache: the cache is closed'));
    if (signal?.aborted) return rejected(signal.reason);
    let tags: readonly string[] | undefined;
    try {
      tags = tagsFor(source, arg, policy);
    } catch (error) {
      return rejected(error);
    }
    const flight = new Flight<V>(key, false, tags); // in no table: nobody joins it, no invalidation reaches it
    this.#queue.enqueue({ source, key, flight: flight as Flight, arg, policy, sink, tags, counted: false });
    // Only its caller leaving abandons it; a retry cannot happen, but would load alone again.
    const again = () => this.loadAlone<V>(source, key, arg, policy, signal, sink);
    if (signal === undefined) return flight.share(again, undefined);
    return flight.joinWithSignal(signal, this.#abandonLeft as (flight: Flight<V>) => void, again);
  }

  /**
   * A flight's retry (see #wait), for its starter and the callers that joined it without a signal:
   * with the latest such joiner's fill when its source and policy are the starter's, else the
   * starter's. An abandoned flight's fill may be stuck (an invalidation frees its waiters:
   * docs/core.md); started again, it would hold them again. (Not for the response layer's
   * late-tagged flights: it re-executes apart for its waiters, by its own rules.)
   */
  readonly #retryItem = (item: Item): Promise<unknown> => {
    const flight = item.flight;
    // The same source and the same resolved policy (its ttl, tags, lock): only the fill differs.
    if (flight.joinerSource === item.source && flight.joinerPolicy === item.policy && !flight.lateTags)
      return this.#again(item.source, item.key, flight.joinerArg, item.policy, undefined, item.sink);
    return this.#again(item.source, item.key, item.arg, item.policy, undefined, item.sink);
  };

  /** Every caller waiting on a flight left (aborted): nobody wants its fill any more. */
  readonly #abandonLeft = (flight: Flight): void => {
    this.#flights.abandon(
      flight,
      new HerdcacheError('E_ABANDONED', 'herdcache: every caller waiting on this fill aborted'),
    );
  };

  /** Starts one background refresh of a stale key, unless one runs or the cap is reached. */
  refresh(source: Source, key: string, arg: unknown, policy: Policy, replacing: Entry): void {
    if (this.#flights.get(key) !== undefined || this.closed) return;
    if (this.#refreshing >= this.#maxRefreshes) {
      // Dropped, not queued: the stale value keeps being served and a later read retries.
      source.counters.refreshesDropped++;
      return;
    }
    let tags: readonly string[] | undefined;
    try {
      tags = tagsFor(source, arg, policy);
    } catch {
      return; // the tags function threw: the caller that had it throw on a miss will see it
    }
    this.#refreshing++;
    source.counters.refreshes++;
    const flight = this.#flights.start(key, true, tags);
    // Served to callers meanwhile only if an invalidateTags that could void it also reaches this
    // flight (abandoning it): the entry's own tags must all be among the flight's (a late-tagged
    // flight is abandoned by any tag).
    if (policy.lateTags === true) flight.lateTags = true;
    if (flight.lateTags || replacing.tags === undefined || replacing.tags.every((tag) => tags?.includes(tag) === true))
      flight.replacing = replacing;
    const done = () => {
      this.#refreshing--;
    };
    flight.promise.then(done, done);
    this.#queue.enqueue({
      source,
      key,
      flight,
      arg,
      policy,
      sink: undefined,
      replaces: replacing.freshUntil,
      tags,
      counted: true,
    });
  }

  /**
   * Counts a caller joining `flight`: by its outcome when known, else noted on the flight and
   * counted when the pipeline learns it (settled): a flight answered from the store is a hit (or
   * stale) for all its callers, only one that fills makes its joiners "coalesced".
   */
  #join(flight: Flight, source: Source, key: string, sink: Sink | undefined): void {
    const outcome = flight.joinedAs;
    if (outcome !== undefined) this.record(source, outcome, key, sink);
    else if ((sink === undefined || sink.joined) && (flight.joinSource === undefined || flight.joinSource === source)) {
      // Counted at once when the outcome is known; a request scope counts its share itself (joined).
      flight.joinSource = source;
      flight.joins++;
      if (sink !== undefined) sink.joined!(flight);
    } else (flight.joiners ??= []).push(source, sink);
  }

  /**
   * The outcome of a flight's store read (or its abandonment before one): counts the load that
   * started it (unless counted already) and, in one pass, the callers that joined it meanwhile.
   */
  settled(item: Item, counter: 'hits' | 'staleServed' | 'misses', tally?: Tally): void {
    if (!item.counted) {
      item.counted = true;
      // A run of the tally when no observer wants each key (see Tally).
      if (tally !== undefined && this.#observers.hookFor(counter) === undefined)
        tally.add(item.source, counter, item.sink);
      else this.record(item.source, counter, item.key, item.sink);
    }
    const flight = item.flight;
    if (flight.joinedAs !== undefined) return;
    const outcome = counter === 'misses' ? 'coalesced' : counter;
    flight.joinedAs = outcome;
    const source = flight.joinSource;
    if (source !== undefined) {
      const n = flight.joins;
      source.counters[outcome] += n;
      const hook = this.#observers.hookFor(outcome);
      if (hook !== undefined) for (let i = 0; i < n; i++) notify(hook, [flight.key, source.name]);
    }
    const joiners = flight.joiners;
    if (joiners !== undefined)
      for (let i = 0; i < joiners.length; i += 2)
        this.record(joiners[i] as Source, outcome, flight.key, joiners[i + 1] as Sink | undefined);
    flight.joiners = undefined; // joinSource stays: the request scopes that joined count under it
  }

  /** #record for a hit, kept small so it inlines into the hit path. */
  #hit(source: Source, key: string, sink: Sink | undefined): void {
    // A named property, not counters[counter]: the keyed increment costs the hit path ~30 ns.
    source.counters.hits++;
    if (sink !== undefined) sink.count(source.name, 'hits', 1);
    const hook = this.#observers.current.onHit;
    if (hook !== undefined) notify(hook, [key, source.name]);
  }

  /** Counts a load's outcome and tells its observer. */
  record(
    source: Source,
    counter: 'hits' | 'misses' | 'coalesced' | 'staleServed',
    key: string,
    sink: Sink | undefined,
  ): void {
    countOn(source, counter, sink);
    const hook = this.#observers.hookFor(counter);
    if (hook !== undefined) notify(hook, [key, source.name]);
  }
}

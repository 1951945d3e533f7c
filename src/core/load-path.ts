/**
 * The load path: a hit from the store's synchronous read, else the key's flight joined, else a flight started and
 * queued for the tick's dispatch (the miss pipeline); stale values served while one refresh runs; outcomes counted once.
 */
import { HerdcacheError } from './errors';
import { Flight, fulfilled, rejected } from './flight';
import { afterRead } from './read-window';
import type { FlightTable } from './flight-table';
import { type Clock, type Entry, refreshEarly } from './freshness';
import { type Observers, notify } from './hooks';
import { joined, record, settled } from './load-counts';
import type { Sink } from './metrics';
import type { Policy } from './options';
import type { Item, Source } from './item';
import { FillPipeline, type PipelineHost } from './pipeline';
import { Refreshes } from './refreshes';
import { NO_ARG } from './registry';
import type { Store, StoreSlot } from './store';
import { DispatchQueue, nextTurn } from './tick';
import { TagsFailed, tagsOrFailed } from './validity';
import type { UnsentInvalidations } from './unsent';

export interface LoadPathOptions extends Omit<PipelineHost, 'settled' | 'refresh'> {
  /** What a hit's freshness is judged by: the registry's CoarseClock by default, else `clock` itself. */
  readonly hitClock: Clock;
  /** Most background refreshes at once; more are dropped. */
  readonly maxRefreshes: number;
}

const ALL_LEFT = 'herdcache: every caller waiting on this fill aborted';

export class LoadPath {
  /** The miss pipeline: store reads, fill locks, fills and writes for the keys queued here. */
  readonly #pipeline: FillPipeline;
  /** Set by the registry's close(): later misses are refused. */
  closed = false;
  readonly #store: Store;
  // Sync reads: getSync (memory, tiered L1: a hit tried first), peekSync (servedUntil judged here), readSlot (memory).
  readonly #syncReads: boolean;
  readonly #peeks: boolean;
  readonly #slots: boolean;
  /** A hit's clock (see LoadPathOptions.hitClock); the pipeline reads the exact one. */
  readonly #clock: Clock;
  readonly #flights: FlightTable;
  readonly #observers: Observers;
  readonly #refreshes: Refreshes;
  /** Probes not dispatched yet, by key (see #probe). */
  readonly #probes = new Map<string, Flight>();
  /** Items waiting for their dispatch into the pipeline. */
  readonly #queue: DispatchQueue<Source, Item>;
  /** Invalidations the store has not taken yet: a hit they cover is a miss (./unsent). */
  readonly #unsent: UnsentInvalidations;

  constructor(options: LoadPathOptions) {
    const { store, hitClock, flights, observers, maxRefreshes } = options;
    // The store's own method, not a bound copy: a bound call goes through a builtin never inlined (~30 ns a hit).
    this.#store = store;
    this.#syncReads = typeof store.getSync === 'function';
    this.#peeks = this.#syncReads && typeof store.peekSync === 'function';
    this.#slots = this.#syncReads && typeof store.readSlot === 'function';
    this.#clock = hitClock;
    this.#flights = flights;
    this.#observers = observers;
    this.#unsent = options.storeCalls.unsent;
    this.#pipeline = new FillPipeline({
      ...options,
      settled: (item, counter, tally) => settled(observers, item, counter, tally),
      refresh: (source, key, arg, policy, replacing) => this.refresh(source, key, arg, policy, replacing),
    });
    this.#queue = new DispatchQueue((items) => {
      if (this.#probes.size > 0) this.#probes.clear();
      this.#pipeline.dispatch(items).catch((error: unknown) =>
        flights.failUnsettled(
          items.map((item) => item.flight),
          error,
        ),
      );
    });
    this.#refreshes = new Refreshes(flights, this.#queue, maxRefreshes, options.clock);
  }

  /** A load: hit (from a synchronous store: a map lookup, a clock read, no allocation), else join or start a flight. */
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
    return this.#miss<V>(source, key, arg, policy, signal, sink, false, own, 0, policy.ttl !== 0);
  }

  /** The synchronous hit (Registry._peek); read through `slot` when the store keeps slots (Store.readSlot). */
  peek(source: Source, key: string, arg: unknown, policy: Policy, sink?: Sink, slot?: StoreSlot): Entry | undefined {
    // A coalesce-only policy (ttl 0) never reads the store: it only joins or starts a flight.
    if (!this.#syncReads || policy.ttl === 0) return undefined;
    const entry = this.#syncRead(key, slot);
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

  /** The store's synchronous read; none where an invalidation the store has not taken covers it (./unsent). */
  #syncRead(key: string, slot?: StoreSlot): Entry | undefined {
    const store = this.#store;
    let entry: Entry | undefined;
    if (slot !== undefined && this.#slots) entry = store.readSlot!(slot);
    else entry = this.#peeks ? store.peekSync!(key) : store.getSync!(key);
    return entry === undefined || !this.#unsent.any || !this.#unsent.covers(key, entry) ? entry : undefined;
  }

  /** A synchronous read's entry: fresh → hit; stale within grace → served, one refresh started; else undefined. */
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

  /** Cache._soloFree: nothing of `key` held, on a store that fills now (FillPipeline.fillsNow), no wrapFill, open. */
  soloFree(key: string): boolean {
    if (this.closed || !this.#pipeline.fillsNow || this.#observers.current.wrapFill !== undefined) return false;
    return this.#flights.get(key) === undefined && this.#syncRead(key) === undefined;
  }

  /** A caller re-contending after `restarts` abandonments (Flight's PATIENT_AFTER); counted when it arrived. */
  #again<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    restarts: number,
  ): Promise<V> {
    const entry = policy.ttl === 0 || !this.#syncReads ? undefined : this.#syncRead(key);
    const answer =
      entry === undefined ? undefined : this.#answer(source, key, entry, arg, policy, sink, true, undefined);
    if (answer !== undefined) return fulfilled(answer) as Promise<V>;
    return this.#miss<V>(source, key, arg, policy, signal, sink, true, false, restarts);
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
    restarts = 0,
    readNow = false, // the store was read for it in this step (load's peek): see FillPipeline.fillsNow
  ): Promise<V> {
    if (this.closed) return rejected(new HerdcacheError('E_CLOSED', 'herdcache: the cache is closed'));
    if (signal?.aborted) return rejected(signal.reason);
    let flight = this.#flights.get(key);
    if (flight !== undefined) {
      const replacing = flight.replacing;
      if (replacing !== undefined && policy.ttl !== 0) {
        // A background refresh runs (an async store found the value stale, or due for early
        // refresh): answer with the value it replaces while that value may still be served (not
        // to a coalesce-only call, which reads no store: it joins the fill).
        const now = this.#clock.now();
        if (now < replacing.staleUntil) {
          if (!this.#syncReads) return this.#probe<V>(source, key, arg, policy, signal, sink, counted, replacing);
          if (!counted) {
            if (now < replacing.freshUntil) this.#hit(source, key, sink);
            else this.record(source, 'staleServed', key, sink);
          }
          return fulfilled(replacing) as Promise<V>;
        }
      }
      if (flight.reading !== undefined) {
        // A store read of it under way was sent before this caller came: it loads once the read is
        // answered; left meanwhile, it counts as a caller of an abandoned flight does (a miss).
        const load = () =>
          signal?.aborted === true && !counted
            ? (this.record(source, 'misses', key, sink), rejected<V>(signal.reason))
            : this.#miss<V>(source, key, arg, policy, signal, sink, counted, own, restarts);
        return afterRead(flight, load, signal);
      }
      if (!counted) joined(this.#observers, flight, source, key, sink);
      this.#joining(flight, policy, sink);
      if (restarts > flight.restarts) flight.restarts = restarts;
    } else {
      const tags = tagsOrFailed(source, arg, policy);
      if (tags instanceof TagsFailed) return rejected(tags.error);
      flight = this.#flights.start(key, false, tags);
      if (policy.lateTags === true) flight.lateTags = true;
      if (restarts > 0) flight.restarts = restarts;
      const item: Item = { source, key, flight, arg, policy, sink, tags, counted };
      const now = signal === undefined && readNow && policy.lateTags === true && this.#pipeline.fillsNow;
      if (!now) this.#queue.enqueue(item);
      // The starter shares (or owns) first: its retry is made of its Item (no closure per key).
      if (signal !== undefined) return this.#wait<V>(flight, source, key, arg, policy, signal, sink, true);
      const shared = (own ? flight.own(this.#retryItem, item) : flight.share(this.#retryItem, item)) as Promise<V>;
      if (now)
        this.#pipeline.fillNow(item).catch((error: unknown) => this.#flights.failUnsettled([item.flight], error));
      return shared;
    }
    if (signal !== undefined) return this.#wait<V>(flight, source, key, arg, policy, signal, sink);
    flight.joinedBy(source, arg, policy);
    return (flight.join() as Promise<V> | undefined) ?? this.#wait<V>(flight, source, key, arg, policy, signal, sink);
  }

  // The retry is made here, not in #miss (every call would allocate its context): a waiter whose flight is
  // abandoned starts over, counted once; its starter (with a signal) a turn later (see #retryItem).
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
    const retry = () => this.#again<V>(source, key, arg, policy, signal, sink, flight.restarts + 1);
    const again = starter ? () => nextTurn().then(retry) : retry;
    return (
      signal === undefined ? flight.share(again, undefined) : flight.joinWithSignal(signal, this.#abandonLeft, again)
    ) as Promise<V>;
  }

  /**
   * One load that neither joins nor starts a shared flight and never touches the store (a scoped loader with
   * `cache: false`, as DataLoader's): its key reaches the batch function even when the key is already in flight.
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
    const tags = tagsOrFailed(source, arg, policy);
    if (tags instanceof TagsFailed) return rejected(tags.error);
    const flight = new Flight<V>(key, false, tags); // in no table: nobody joins it, no invalidation reaches it
    this.#queue.enqueue({ source, key, flight: flight as Flight, arg, policy, sink, tags, counted: false });
    // Only its caller leaving abandons it; a retry cannot happen, but would load alone again.
    const again = () => this.loadAlone<V>(source, key, arg, policy, signal, sink);
    if (signal === undefined) return flight.share(again, undefined);
    return flight.joinWithSignal(signal, this.#abandonLeft as (flight: Flight<V>) => void, again);
  }

  /**
   * A flight's retry (see #wait), for its starter and joiners without a signal: with the latest such
   * joiner's fill when its source and policy are the starter's (the starter's may be the stuck one
   * an invalidation freed them from: docs/core.md), else the starter's. Not for late-tagged flights.
   */
  readonly #retryItem = (item: Item): Promise<unknown> => {
    const flight = item.flight;
    // The same source and the same resolved policy (its ttl, tags, lock): only the fill differs.
    const restarts = flight.restarts + 1;
    if (flight.joinerSource === item.source && flight.joinerPolicy === item.policy && !flight.lateTags)
      return this.#again(item.source, item.key, flight.joinerArg, item.policy, undefined, item.sink, restarts);
    return this.#again(item.source, item.key, item.arg, item.policy, undefined, item.sink, restarts);
  };

  /**
   * A caller arriving during a background refresh on a store read asynchronously (Redis), where an
   * invalidation on another replica since the replaced entry's read reaches no flight: it reads the
   * store first (a probe Item: a value, a stale one, or on a failed read the replaced entry), and
   * joins the refresh only when that holds nothing usable (#afterProbe). Callers of one tick share
   * one probe; a dispatch ends sharing (a read under way may predate an invalidation seen since).
   */
  #probe<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    counted: boolean,
    replacing: Entry,
  ): Promise<V> {
    let probe = this.#probes.get(key) as Flight<V> | undefined;
    if (probe === undefined || probe.ended) {
      const tags = tagsOrFailed(source, arg, policy);
      if (tags instanceof TagsFailed) return rejected(tags.error);
      probe = new Flight<V>(key, false, tags); // its callers' own: in no table, nobody else joins it
      this.#probes.set(key, probe as Flight);
      this.#queue.enqueue({ source, key, flight: probe as Flight, arg, policy, sink, tags, counted, probe: replacing });
    } else if (!counted) joined(this.#observers, probe as Flight, source, key, sink);
    const join = () => this.#afterProbe<V>(source, key, arg, policy, signal, sink);
    if (signal !== undefined) return probe.joinWithSignal(signal, this.#abandonLeft as (f: Flight<V>) => void, join);
    return probe.join() ?? probe.share(join, undefined);
  }

  /** A probe the store did not answer: the refresh's result (a fill running here: docs/redis.md), or a load anew. */
  #afterProbe<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
  ): Promise<V> {
    const flight = this.#flights.get(key);
    if (flight === undefined || flight.replacing === undefined)
      return this.#again<V>(source, key, arg, policy, signal, sink, 0);
    if (flight.reading !== undefined)
      return afterRead(flight, () => this.#afterProbe<V>(source, key, arg, policy, signal, sink), signal);
    this.#joining(flight, policy, sink);
    if (signal !== undefined) return this.#wait<V>(flight, source, key, arg, policy, signal, sink);
    return (flight.join() as Promise<V> | undefined) ?? this.#wait<V>(flight, source, key, arg, policy, signal, sink);
  }

  /**
   * A caller joins `flight`: its request notes the flight's age (RequestScope._joinedBefore), and a getOrCompute
   * caller's own tags join the value's (a loader's are the starter's: same key, same function; FlightTable.joinTags).
   */
  #joining(flight: Flight, policy: Policy, sink: Sink | undefined): void {
    flight.joinedSinceRead = true; // an announced value, written before it came, does not answer it (./read-window)
    sink?.joinedFlight?.(flight.seq);
    if (policy.tags !== undefined && policy.tags !== flight.tags) this.#flights.joinTags(flight, policy.tags);
  }

  /** Every caller waiting on a flight left (aborted): nobody wants its fill any more (see Refreshes.serving). */
  readonly #abandonLeft = (flight: Flight): void => {
    if (!this.#refreshes.serving(flight)) this.#flights.abandon(flight, new HerdcacheError('E_ABANDONED', ALL_LEFT));
  };

  /** Starts one background refresh of a stale key, unless one runs or the cap is reached (./refreshes). */
  refresh(source: Source, key: string, arg: unknown, policy: Policy, replacing: Entry): void {
    if (!this.closed) this.#refreshes.start(source, key, arg, policy, replacing);
  }

  /** #record for a hit, kept small so it inlines into the hit path (a named counter: a keyed one costs ~30 ns). */
  #hit(source: Source, key: string, sink: Sink | undefined): void {
    source.counters.hits++;
    if (sink !== undefined) sink.count(source.name, 'hits', 1);
    const hook = this.#observers.current.onHit;
    if (hook !== undefined) notify(hook, [key, source.name]);
  }

  /** Counts a load's outcome and tells its observer. */
  record(source: Source, counter: 'hits' | 'misses' | 'coalesced' | 'staleServed', key: string, sink?: Sink): void {
    record(this.#observers, source, counter, key, sink);
  }
}

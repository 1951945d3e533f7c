/**
 * The miss pipeline: what happens to the keys missed in one tick, after the load path has put
 * each in a flight. Three steps, each handing the next what it could not answer, none calling
 * back into the one before:
 *   read (here): one store read for all of them, the double-check (a value written since the
 *     caller's own read is not recomputed), tag versions read alongside;
 *   lock (lock-wait.ts): for what is still missing on a store with a fill lock, the locks in one
 *     call, then wait/poll for keys held elsewhere;
 *   fill (fill-write.ts): the user's functions for exactly the keys this process won (or needs
 *     without a lock), the fenced write, the flights answered.
 * Every store call goes through StoreCalls and never fails a load: a failure is counted and the
 * value is computed. The two calls back to the load path (`settled`, `refresh`) are below.
 */
import type { FlightTable } from './flight-table';
import { type Clock, type Entry, refreshEarly } from './freshness';
import type { Observers } from './hooks';
import { Tally } from './metrics';
import type { Item, Source } from './item';
import { FillWrite, type FillWriteDeps } from './fill-write';
import { type BegunLocks, LockWait, type LockWaitDeps } from './lock-wait';
import { type Policy, storesValues } from './options';
import type { LockAttempt, Store } from './store';
import type { StoreCalls } from './store-calls';
import { ownTagVersions, readTagVersions, tagsValid, usable } from './validity';
import { hasTagClock } from './late-tags';
import { beginReads, endReads } from './read-window';

/**
 * What the pipeline needs from the registry that owns it: its parts, and two calls to the load
 * path, which owns what they change (the flights' join counts, the refresh cap and tick queue).
 */
export interface PipelineHost extends FillWriteDeps, LockWaitDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly flights: FlightTable;
  readonly storeCalls: StoreCalls;
  readonly observers: Observers;
  /**
   * The outcome of an item's read (hit, stale, miss; a flight abandoned before it: miss): counts
   * its load (unless counted) and the callers that joined its flight meanwhile. Called before the
   * flight is answered, so a caller joining after it is counted by that outcome directly.
   */
  settled(item: Item, counter: 'hits' | 'staleServed' | 'misses', tally?: Tally): void;
  /** Starts one background refresh of a key just served stale (or due for early refresh). */
  refresh(source: Source, key: string, arg: unknown, policy: Policy, replacing: Entry): void;
}

export class FillPipeline {
  readonly #host: PipelineHost;
  readonly #store: Store;
  readonly #getSync: ((key: string) => Entry | undefined) | undefined;
  readonly #clock: Clock;
  readonly #flights: FlightTable;
  readonly #calls: StoreCalls;
  readonly #fills: FillWrite;
  readonly #locks: LockWait;
  /** The store has a tag clock: late-tagged fills read it before they start (late-tags). */
  readonly #clocked: boolean;
  /** Its reads take a round trip (not a getSync seeing the whole store): a caller may come during one. */
  readonly #readsAsync: boolean;
  /**
   * A late-tagged miss (the response layer's) is filled in the step its store was read, not at the
   * tick (fillNow): a store read wholly and synchronously (getSync, not an L1 nor a peekSync copy),
   * without a fill lock or tag clock: the memory store. No other flight of the key runs, so nothing
   * lands before the tick's read, which would find the same miss. Loaders' keys wait to be batched.
   */
  readonly fillsNow: boolean;

  constructor(host: PipelineHost) {
    this.#host = host;
    this.#store = host.store;
    this.#getSync = host.store.getSync?.bind(host.store);
    this.#clock = host.clock;
    this.#flights = host.flights;
    this.#calls = host.storeCalls;
    this.#fills = new FillWrite(host);
    this.#locks = new LockWait(host, this.#fills);
    this.#clocked = hasTagClock(host.store);
    this.#readsAsync = this.#getSync === undefined || host.store.getSyncComplete === false;
    const { store } = host;
    this.fillsNow = !this.#readsAsync && store.peekSync === undefined && store.lock === undefined && !this.#clocked;
  }

  /**
   * One dispatch: the keys missed in this tick by every loader and getOrCompute, read in one
   * store call (the double-check: a value written since the caller's own read is not
   * recomputed), then locked in one call and filled, each source in its own batches.
   */
  async dispatch(queued: Item[]): Promise<void> {
    // Coalesce-only items (ttl 0) never touch the store: no read, no lock, no write. They are
    // misses by definition and go straight to their fill, batched with the tick's other keys.
    // One pass: dropped items left out, the others split, whether any has tags noted.
    const items: Item[] = [];
    let unstored: Item[] | undefined;
    let tagged = false;
    for (let i = 0; i < queued.length; i++) {
      const item = queued[i]!;
      if (this.#droppedBeforeOutcome(item)) continue;
      if (!storesValues(item.policy)) (unstored ??= []).push(item);
      else {
        items.push(item);
        if (item.tags !== undefined) tagged = true;
      }
    }
    if (unstored !== undefined) {
      for (const item of unstored) this.#host.settled(item, 'misses');
      if (items.length === 0) return this.#fills.fill(unstored, undefined, 'none');
    }
    if (items.length === 0) return;
    const store = this.#store;
    const versioned = tagged && store.tagVersions !== undefined;
    // Tag versions are read with the entries (same tick, in parallel) and BEFORE any fill: a fill
    // records them, so an invalidation landing during the fill makes its write a miss.
    // Without tag versions to read, the read is awaited alone (no Promise.all: its array, promises
    // and the turns it takes, on every warm read of untagged keys).
    // A caller coming while the read is under way waits for its end, then joins or reads anew (./read-window).
    const windowed = this.#readsAsync;
    if (windowed) beginReads(items, versioned);
    const read = versioned
      ? (await Promise.all([this.#read(items), readTagVersions(store, this.#calls, items)]))[0]
      : await this.#read(items);
    const { entries, begun, failed } = read;
    let current = ownTagVersions(store, this.#calls, items, entries);
    if (current instanceof Promise) current = await current;
    const now = this.#clock.now();
    const toFill: Item[] = [];
    const tally = new Tally();
    try {
      this.#answer(items, entries, now, current, toFill, tally, failed);
    } finally {
      tally.flush();
      if (windowed) endReads(items);
    }
    if (begun !== undefined) this.#releaseDropped(begun, items);
    if (unstored !== undefined) toFill.push(...unstored);
    const locking = store.lock !== undefined && toFill.length > 0 ? toFill.filter(locks) : [];
    if (locking.length === 0) begun?.watch?.close();
    if (toFill.length === 0) return;
    // One step or both (no array nor Promise.all for one: a memory store's fills never lock).
    if (locking.length === 0) return this.#fills.fill(toFill, undefined, 'none');
    if (locking.length === toFill.length) return this.#locks.lockAndFill(locking, begun);
    await Promise.all([
      this.#fills.fill(
        toFill.filter((item) => !locks(item)),
        undefined,
        'none',
      ),
      this.#locks.lockAndFill(locking, begun),
    ]);
  }

  /** A miss filled at once, its store read in this same step (see fillsNow): one key, no read, no tick. */
  fillNow(item: Item): Promise<void> {
    this.#host.settled(item, 'misses');
    return this.#fills.fill([item], undefined, 'none');
  }

  /**
   * Releases the locks the read won for items abandoned before their outcome (left out of the
   * fill): nobody fills under them, and other replicas would wait on them until lockTtl.
   */
  #releaseDropped(begun: BegunLocks, items: Item[]): void {
    let dropped: string[] | undefined;
    for (const [item, attempt] of begun.attempts) {
      if (!attempt.won || !item.flight.abandoned) continue;
      item.source.counters.lockAcquired++; // as the lock step counts a lock won for a flight abandoned
      (dropped ??= []).push(item.key);
    }
    if (dropped === undefined) return;
    const lock = this.#store.lock!;
    const keys = dropped;
    void this.#calls.call('lock.release', () => lock.release(keys, begun.token), items);
  }

  /** The read's answers: hits and stale values resolve their flights, the rest is what to fill. */
  #answer(
    items: Item[],
    entries: readonly (Entry | undefined)[],
    now: number,
    current: ReadonlyMap<string, number> | undefined,
    toFill: Item[],
    tally: Tally,
    failed: Read['failed'],
  ): void {
    // Invalidations the store has not taken yet: the entries they cover are misses here (./unsent).
    const unsent = this.#calls.unsent.any ? this.#calls.unsent : undefined;
    const outage = this.#calls.outage;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      let found = entries[i];
      // A failed read's entries are the outage memo's (./outage): filled here after every local
      // invalidation (one drops what it covers), so none is covered by an unsent one.
      let held = failed === true || (failed !== undefined && failed.includes(i));
      // Tags whose versions could not be read (the store down): an entry the store holds cannot
      // be judged; the memo's answers in its place (never in place of a miss the store answered).
      const unreadable = unreadableTags(item);
      if (unreadable && !held && found !== undefined && outage.size > 0) {
        const kept = outage.read([item.key], now)[0];
        if (kept !== undefined) [found, held] = [kept, true];
      }
      const entry = found !== undefined && !held && unsent?.covers(item.key, found) === true ? undefined : found;
      const source = item.source;
      if (this.#droppedBeforeOutcome(item)) continue;
      if (
        entry !== undefined &&
        (held && unreadable ? heldUsable(item, entry, now) : usable(item, entry, now, current))
      ) {
        this.#host.settled(item, 'hits', tally);
        this.#flights.resolve(item.flight, entry.value);
        if (!item.flight.background && item.policy.beta > 0 && refreshEarly(entry, now, item.policy.beta)) {
          this.#host.refresh(source, item.key, item.arg, item.policy, entry);
        }
      } else if (
        entry !== undefined &&
        now < entry.staleUntil &&
        !item.flight.background &&
        tagsValid(item, entry, current)
      ) {
        this.#host.settled(item, 'staleServed', tally);
        this.#flights.resolve(item.flight, entry.value);
        this.#host.refresh(source, item.key, item.arg, item.policy, entry);
      } else if (item.probe !== undefined) {
        // A caller's read during a refresh (LoadPath's probe), never filled here. Its read failed:
        // the value the refresh replaces, as without the read. Else nothing usable: it joins the refresh.
        if (failed === true || failed?.includes(i) === true) {
          this.#host.settled(item, 'staleServed', tally);
          this.#flights.resolve(item.flight, item.probe.value);
        } else {
          this.#host.settled(item, 'misses', tally);
          this.#flights.abandon(item.flight, PROBE_MISSED);
        }
      } else {
        this.#host.settled(item, 'misses', tally);
        toFill.push(item);
      }
    }
  }

  /**
   * Whether an item's flight was abandoned before the store told us its outcome. Its caller's
   * load still counts once: it found no usable value here and started a fill, i.e. a miss.
   */
  #droppedBeforeOutcome(item: Item): boolean {
    if (!item.flight.abandoned) return false;
    this.#host.settled(item, 'misses'); // its joiners joined a flight that would have filled: coalesced
    return true;
  }

  async #read(items: Item[]): Promise<Read> {
    // A getSync that sees the whole store answers the double-check without a round trip; one
    // that sees a part (a tiered store's L1) does not: the rest is read with getMany.
    const getSync = this.#getSync;
    const store = this.#store;
    if (getSync !== undefined && store.getSyncComplete !== false)
      return { entries: items.map((item) => getSync(item.key)), begun: undefined };
    const keys = items.map((item) => item.key);
    const lock = store.lock;
    if (lock?.readOrAcquire !== undefined) {
      // The read tries the locks of keys it finds missing in the same round trip: a cold key's
      // fill starts after one call, not a read and then a lock call (FillLock.readOrAcquire).
      let lockable: boolean[] | undefined;
      let late = false;
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!;
        if (!locks(item)) continue;
        (lockable ??= new Array(items.length).fill(false))[i] = true;
        if (item.policy.lateTags === true) late = true;
      }
      if (lockable !== undefined) return this.#readOrAcquire(items, keys, lockable, late && this.#clocked);
    }
    let failedAt: readonly number[] | undefined;
    const entries = await this.#calls.call(
      'getMany',
      () => store.getMany(keys),
      items,
      (at) => (failedAt = at),
    );
    return {
      entries: entries === undefined ? this.#outage(keys) : this.#heldFor(keys, entries, failedAt),
      begun: undefined,
      failed: entries === undefined ? true : failedAt,
    };
  }

  /** A read the store failed: what this process filled while it could not take it (./outage). */
  #outage(keys: readonly string[]): readonly (Entry | undefined)[] {
    const outage = this.#calls.outage;
    return outage.size === 0 ? [] : outage.read(keys, this.#clock.now());
  }

  /**
   * A read that failed in part (a Cluster master down): the keys of the failed part are what this
   * process filled while the store could not take them, as for a read that failed as a whole.
   */
  #heldFor(
    keys: readonly string[],
    entries: readonly (Entry | undefined)[],
    failedAt: readonly number[] | undefined,
  ): readonly (Entry | undefined)[] {
    const outage = this.#calls.outage;
    if (failedAt === undefined || failedAt.length === 0 || outage.size === 0) return entries;
    const held = outage.read(
      failedAt.map((i) => keys[i]!),
      this.#clock.now(),
    );
    let patched: (Entry | undefined)[] | undefined;
    for (let j = 0; j < failedAt.length; j++) {
      const entry = held[j];
      if (entry === undefined || entries[failedAt[j]!] !== undefined) continue;
      (patched ??= [...entries])[failedAt[j]!] = entry;
    }
    return patched ?? entries;
  }

  async #readOrAcquire(items: Item[], keys: string[], lockable: boolean[], clock: boolean): Promise<Read> {
    const lock = this.#store.lock!;
    const token = this.#locks.token();
    const ttl = this.#host.timing.lockTtl;
    // A late-tagged fill may follow: the store reads its tag clock in the same round trip (late-tags).
    let failedAt: readonly number[] | undefined;
    const read = await this.#calls.call(
      'getMany',
      () =>
        clock ? lock.readOrAcquire!(keys, lockable, token, ttl, true) : lock.readOrAcquire!(keys, lockable, token, ttl),
      items,
      (at) => (failedAt = at),
    );
    if (read === undefined) return { entries: this.#outage(keys), begun: undefined, failed: true };
    const { watch } = read;
    const entries = this.#heldFor(keys, read.entries, failedAt);
    if (read.clock !== undefined)
      for (const item of items) if (item.policy.lateTags === true) item.clock ??= read.clock;
    let attempts: Map<Item, LockAttempt> | undefined;
    for (let i = 0; i < items.length; i++) {
      const attempt = read.attempts[i];
      if (attempt !== undefined) (attempts ??= new Map()).set(items[i]!, attempt);
    }
    if (attempts === undefined) {
      // Nothing tried (a warm read): the lock step, if any, is as without readOrAcquire.
      watch?.close();
      return { entries, begun: undefined, failed: failedAt };
    }
    return { entries, begun: { token, watch, attempts }, failed: failedAt };
  }
}

/** The read step's outcome: the entries, and the lock step it began (readOrAcquire), if any. */
interface Read {
  readonly entries: readonly (Entry | undefined)[];
  readonly begun: BegunLocks | undefined;
  /** Positions whose read failed (true: all of it). */
  readonly failed?: true | readonly number[];
}

/** Whether the item's tags' versions could not be read (NaN: the store failed). */
function unreadableTags(item: Item): boolean {
  const versions = item.versions;
  if (versions === undefined) return false;
  for (let i = 0; i < versions.length; i++) if (Number.isNaN(versions[i])) return true;
  return false;
}

/**
 * An outage memo's entry answers an item whose tags' versions could not be read while fresh (and
 * newer than the entry a refresh replaces), and only if it carries the item's tags: the memo drops
 * what a local invalidation of one of its own tags covers, not an entry held under other tags.
 */
function heldUsable(item: Item, entry: Entry, now: number): boolean {
  if (!(now < entry.freshUntil && (item.replaces === undefined || entry.freshUntil > item.replaces))) return false;
  const tags = item.tags!;
  const own = entry.tags;
  if (own === undefined || own.length !== tags.length) return false;
  for (let i = 0; i < tags.length; i++) if (own[i] !== tags[i]) return false;
  return true;
}

/** Whether this item's fill takes the distributed lock: only values that are stored need one (a probe is never filled). */
function locks(item: Item): boolean {
  return item.policy.lock && storesValues(item.policy) && item.probe === undefined;
}

/** Why a probe ends without an answer: its callers join the refresh (never seen by a user). */
const PROBE_MISSED = new Error('herdcache: the store holds no usable value; joining the refresh');

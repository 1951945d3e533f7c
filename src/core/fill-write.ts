/**
 * The pipeline's last step: run each source's function for exactly the keys to fill (in the
 * source's groups: batches, or one call per key), write what succeeded (fenced by the fill lock
 * when one is held, else refused by the store for a key invalidated since the fill started),
 * release what is not written, and answer the flights. Failures are answered, never written.
 */
import { HerdcacheError } from './errors';
import { FillRun } from './fill-run';
import { Failure } from './flight';
import type { FlightTable } from './flight-table';
import { type Clock, makeEntry, physicalTtl } from './freshness';
import { type Observers, notify } from './hooks';
import type { Item, LockOutcome, Source } from './item';
import { freshPolicy, hasTagClock, LateTagged, readClock } from './late-tags';
import { countOn } from './metrics';
import { storesValues } from './options';
import type { Store, StoreWrite } from './store';
import type { StoreCalls } from './store-calls';
import { WrappedFill, callersOf, runGroup } from './fill-call';

/** What the fill step needs from the registry. */
export interface FillWriteDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly flights: FlightTable;
  readonly storeCalls: StoreCalls;
  readonly observers: Observers;
}

/** Why a late-tagged flight is abandoned when it ends (FillRun.lateCheck). */
const LATE_INVALIDATED = new HerdcacheError(
  'E_INVALIDATED',
  'herdcache: a tag of the value was invalidated while it was computed',
);

const isLateTagged = (result: unknown): boolean => result instanceof LateTagged;
/** What fill() returns when there is nothing to fill. */
const NOTHING: Promise<void> = Promise.resolve();

/** An item's tag clock as a number: NaN when it has none (never read, or the read failed). */
function clock(item: Item): number {
  return item.clock ?? NaN;
}

/** The tags an entry is written with when its fill returned LateTagged, and their versions. */
interface LateTags {
  /** The fill's result (told when it is served, not stored: see LateTagged.refused). */
  readonly from: LateTagged;
  tags: readonly string[] | undefined;
  versions: readonly number[] | undefined;
  /** The versions (or the tag clock before the fill) could not be read: the store failed, no tag was invalidated. */
  unreadable?: boolean;
}

/** Per item of a fill, its LateTags (undefined: its result was not LateTagged). */
type LateTagList = (LateTags | undefined)[];

export class FillWrite {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #flights: FlightTable;
  readonly #calls: StoreCalls;
  readonly #observers: Observers;

  /** Keeps what the store failed to take (./outage); forgets what it took, when anything is kept. */
  #outage(writes: readonly StoreWrite[], failed: readonly StoreWrite[], now: number, issued: number): void {
    const outage = this.#calls.outage;
    if (failed.length > 0) outage.keep(failed, now, issued);
    if (outage.size === 0 || failed.length === writes.length) return;
    const missed = new Set(failed);
    outage.drop(
      writes.filter((write) => !missed.has(write)).map((write) => write.key),
      [],
      false,
    );
  }

  constructor(deps: FillWriteDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#flights = deps.flights;
    this.#calls = deps.storeCalls;
    this.#observers = deps.observers;
  }

  /**
   * Runs each source's function for its items (in its groups), writes what succeeded, settles
   * all. `token`: the fill lock held for these keys (the write is fenced by it and releases it).
   */
  fill(all: Item[], token: string | undefined, lock: LockOutcome): Promise<void> {
    // A flight abandoned before its fill starts is not filled (the only such path is a failed lock
    // call, where no lock is held; with a token, callers pass flights checked in this very step).
    // One item (a single cold key, a response's execution): its own group, nothing to sort out.
    if (all.length !== 1) return this.#fillMany(all, token, lock);
    const item = all[0]!;
    return item.flight.abandoned ? NOTHING : this.#fillGroup(item.source, [item], token, lock);
  }

  async #fillMany(all: Item[], token: string | undefined, lock: LockOutcome): Promise<void> {
    const items = all.filter((item) => !item.flight.abandoned);
    if (items.length === 0) return;
    const bySource = new Map<Source, Item[]>();
    for (const item of items) {
      const list = bySource.get(item.source);
      if (list === undefined) bySource.set(item.source, [item]);
      else list.push(item);
    }
    const runs: Promise<void>[] = [];
    for (const [source, list] of bySource)
      for (const group of source.groups(list)) runs.push(this.#fillGroup(source, group, token, lock));
    await Promise.all(runs);
  }

  async #fillGroup(source: Source, items: Item[], token: string | undefined, lockOutcome: LockOutcome): Promise<void> {
    // A late-tagged fill the read and lock steps did not clock (no lock, a store that ignored the
    // ask, a failed lock call) reads the tag clock before it starts: one round trip (late-tags).
    const clockRead = readClock(this.#store, this.#calls, items);
    if (clockRead !== undefined) await clockRead;
    const run = new FillRun(items.length);
    let late = false;
    for (const item of items) {
      item.flight.run = run;
      if (item.policy.lateTags === true) late = true;
    }
    if (late) {
      run.lateCheck = (tags, anyTag) => this.#abandonLate(items, tags, anyTag);
      run.callers = () => callersOf(items);
    }
    // Its every flight abandoned (callers all left, invalidated): its result will not be written, so
    // its locks go now, not when the fill returns (one that ignores its signal kept other replicas
    // waiting for the lock's ttl). A release when it returns finds other tokens: fenced, a no-op.
    const lock = this.#store.lock;
    if (token !== undefined && lock !== undefined)
      run.onAbandoned = () =>
        void this.#calls.call(
          'lock.release',
          () =>
            lock.release(
              items.map((item) => item.key),
              token,
            ),
          items,
        );
    const started = performance.now();
    const startedAt = this.#clock.now();
    // A local invalidation during the fill keeps its result out of the outage memo (#hold).
    const heldSince = this.#calls.outage.invalidations;
    const wrap = this.#observers.current.wrapFill;
    const results = await (wrap === undefined
      ? runGroup(source, items, run)
      : WrappedFill.wrapped(wrap, new WrappedFill(source, items, run, lockOutcome)));
    const duration = performance.now() - started;
    // A late-tagged value one of whose tags was invalidated while it ran (its fill did not ask:
    // internal invalidatedLate): abandoned now, not written, its callers start over (late-tags).
    if (late)
      for (let i = 0; i < items.length; i++) {
        const result = results[i];
        if (result instanceof LateTagged)
          this.#flights.abandonLate(
            items[i]!.flight,
            result.tags,
            result.servedOnly && result.tags.length === 0 && !result.unfenced,
            LATE_INVALIDATED,
          );
      }
    let lateTags = results.some(isLateTagged) ? this.#lateTags(items, results) : undefined;
    // Versions to read (a tag-versioned store) make it a promise; otherwise no step is awaited.
    if (lateTags instanceof Promise) lateTags = await lateTags;
    const now = this.#clock.now();
    const writes: StoreWrite[] = [];
    const release: string[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const result = results[i];
      const failed = result instanceof Failure;
      countOn(source, failed ? 'fillFailures' : 'fills', item.sink);
      const onFill = this.#observers.current.onFill;
      if (onFill !== undefined) notify(onFill, [item.key, source.name, duration, failed ? result.error : undefined]);
      if (item.flight.abandoned || failed || result === undefined) {
        // Abandoned (invalidated or cleared while filling: the result may be stale), failed
        // (errors are never cached: the next caller retries), or nothing to cache.
        if (token !== undefined) release.push(item.key);
      } else {
        if (!storesValues(item.policy)) continue; // coalesce-only: served, never written
        // Tags whose versions could not be read (the store down): the value is served, not
        // written, and held in process for a moment as a write the store failed is (./outage).
        const tagged = lateTags?.[i];
        if (item.flight.joinedTags === undefined && item.versions !== undefined && item.versions.some(Number.isNaN)) {
          if (token !== undefined) release.push(item.key);
          if (tagged === undefined) this.#hold(item, results[i], now, item.tags, heldSince);
          continue;
        }
        if (item.flight.joinedTags !== undefined) {
          // A joiner named tags of its own: one may have been invalidated after the fill started,
          // before it joined. Served, not written (FlightTable.joinTags).
          if (token !== undefined) release.push(item.key);
          continue;
        }
        if (tagged !== undefined && tagged.versions?.some(Number.isNaN)) {
          const refused = tagged.unreadable === true ? 'unavailable' : 'invalidated';
          if (refused === 'invalidated' || !tagged.from.servedOnly) tagged.from.refused = refused;
          // Invalidated elsewhere after it started: its callers may have come after that (late-tags).
          const instead = tagged.from.ifInvalidated;
          if (refused === 'invalidated' && instead !== undefined) results[i] = instead.value;
          if (token !== undefined) release.push(item.key);
          if (refused === 'unavailable' && !tagged.from.servedOnly)
            this.#hold(item, results[i], now, tagged.tags, heldSince);
          continue;
        }
        if (tagged?.from.servedOnly === true) {
          if (token !== undefined) release.push(item.key); // served to the waiters, not written
          continue;
        }
        const policy = freshPolicy(item.policy, tagged?.from.freshMs);
        const entry = makeEntry(results[i], now, policy, {
          fillMs: item.policy.beta > 0 ? now - startedAt : undefined,
          tags: tagged === undefined ? item.tags : tagged.tags,
          tagVersions: tagged === undefined ? item.versions : tagged.versions,
          valueBytes: tagged?.from.valueBytes,
        });
        if (tagged !== undefined && this.#store.keeps?.(item.key, entry) === false) {
          tagged.from.refused = 'oversized'; // larger than the store keeps: served, not written
          if (token !== undefined) release.push(item.key);
          continue;
        }
        // Without the lock nothing fences this write: `since` lets the store refuse it when the
        // key was invalidated after this fill started (the lockless gap).
        writes.push(
          token === undefined
            ? { key: item.key, entry, ttl: physicalTtl(entry, now), since: startedAt }
            : { key: item.key, entry, ttl: physicalTtl(entry, now) },
        );
      }
    }
    const calls = this.#calls;
    if (release.length > 0 && lock !== undefined && token !== undefined) {
      void calls.call('lock.release', () => lock.release(release, token), items);
    }
    // The write is issued (a store may gather it with others for a moment: redisStore sends the
    // fenced writes finishing together in one call) before the callers are answered, in the same
    // synchronous step: whatever a caller does next (a read, a delete) reaches the store after
    // it (memory: applied already; Redis: same connection, commands in order). With a lock, the
    // write lands only if our lock still stands.
    let written: Promise<unknown> | undefined;
    if (writes.length > 0) {
      const issued = calls.outage.invalidations;
      written =
        lock !== undefined && token !== undefined
          ? calls
              .call('lock.writeAndRelease', () => lock.writeAndRelease(writes, token), items)
              .then((landed) => {
                // Failed or timed out (all, or the part on a failing Cluster master): make sure no
                // lock of ours outlives this fill.
                const unsure = landed === undefined ? writes : writes.filter((_, i) => landed[i] === undefined);
                const keys = unsure.map((w) => w.key);
                if (keys.length > 0) void calls.call('lock.release', () => lock.release(keys, token), items);
                this.#outage(writes, unsure, now, issued);
              })
          : calls
              .call('setMany', async () => (await this.#store.setMany(writes), true), items)
              .then((took) => this.#outage(writes, took === true ? [] : writes, now, issued));
      // A lock or store that gathers writes for a moment (redisStore: to the end of the event-loop
      // turn, so the fills finishing in one turn share one call) says when they are on the
      // connection; the callers are answered after that, so the order above holds for them too.
      const sent = lock !== undefined && token !== undefined ? lock.sent?.() : this.#store.writesSent?.();
      if (sent !== undefined) await sent;
    }
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const result = results[i];
      if (item.flight.abandoned) {
        if (item.flight.detached) this.#flights.deliver(item.flight, result); // its callers' answer, not written
        continue;
      }
      if (result instanceof Failure) this.#flights.fail(item.flight, result.error);
      else this.#flights.resolve(item.flight, result);
    }
    // Answered: nothing reads the fill's argument again. The dispatch holding these items may run
    // on for a slower fill of its batch (a response layer's execution): a getOrCompute fill's
    // closure, and the request it holds, would stay reachable until then, long enough for V8 to
    // move them to the old generation. An abandoned flight's callers re-contend with it, on a
    // microtask that may not have run yet: kept.
    for (const item of items) if (!item.flight.abandoned) item.arg = undefined;
    await written;
  }

  /**
   * Holds a value whose tags' versions could not be read (the store down: not written) in the
   * outage memo, as a write the store failed is: read while the store cannot be, a moment at most.
   */
  #hold(item: Item, value: unknown, now: number, tags: readonly string[] | undefined, since: number): void {
    const entry = makeEntry(value, now, item.policy, { tags });
    this.#calls.outage.keep([{ key: item.key, entry, ttl: physicalTtl(entry, now) }], now, since);
  }

  /** FillRun.lateCheck: abandons the run's flights that saw one of `tags` invalidated (see abandonLate). */
  #abandonLate(items: readonly Item[], tags: readonly string[], anyTag: boolean): boolean {
    let abandoned = false;
    for (const item of items)
      if (this.#flights.abandonLate(item.flight, tags, anyTag, LATE_INVALIDATED)) abandoned = true;
    return abandoned;
  }

  /**
   * Unwraps the LateTagged results of a fill in place (`results[i]` becomes the value) and returns,
   * per position, the entry's tags (the item's own plus the late ones) with their versions: the
   * item's read before the fill, the late ones read now in one call (see late-tags): a promise only
   * then (a store without tag versions, the memory store, is answered in the same step).
   */
  #lateTags(items: Item[], results: unknown[]): LateTagList | Promise<LateTagList> {
    const out: LateTagList = [];
    const store = this.#store;
    // The late tags' versions are read only from a tag-versioned store (memory: none to read).
    const fresh = store.tagVersions === undefined ? undefined : new Set<string>();
    for (let i = 0; i < items.length; i++) {
      const result = results[i];
      if (!(result instanceof LateTagged)) continue;
      results[i] = result.value;
      if (result.servedOnly && (result.tags.length === 0 || !hasTagClock(store))) {
        // Never written: its versions are read only to tell its waiters of an invalidation elsewhere.
        out[i] = { from: result, tags: undefined, versions: undefined };
        continue;
      }
      const own = items[i]!.tags;
      if (result.distinct && (own === undefined || own.length === 0)) {
        // Each once already (the response layer's walk lists an entity once): no Set.
        if (fresh !== undefined) for (const tag of result.tags) fresh.add(tag);
        out[i] = { from: result, tags: result.tags.length > 0 ? result.tags : undefined, versions: undefined };
        continue;
      }
      // Each tag once, the item's own first (a response's ~40 entity tags: one Set, no spread).
      const unique = new Set<string>(own);
      const before = unique.size;
      for (const tag of result.tags) unique.add(tag);
      const tags = [...unique];
      if (fresh !== undefined) for (let t = before; t < tags.length; t++) fresh.add(tags[t]!);
      out[i] = { from: result, tags: tags.length > 0 ? tags : undefined, versions: undefined };
    }
    if (store.tagVersions === undefined || fresh === undefined || fresh.size === 0) return out;
    // From the moment the read is sent, a caller joining may come after an invalidation elsewhere
    // that the read does not see: it starts a flight of its own instead (FlightTable.seal).
    for (let i = 0; i < items.length; i++) if (out[i]?.tags !== undefined) this.#flights.seal(items[i]!.flight);
    return this.#readLateVersions(items, out, [...fresh]);
  }

  /** #lateTags' read of the late tags' versions (`unique`), into `out`. */
  async #readLateVersions(items: Item[], out: LateTagList, unique: string[]): Promise<LateTagList> {
    const store = this.#store;
    // With a tag clock: a late tag invalidated since the earliest clock of these fills reads NaN.
    const clocked = hasTagClock(store);
    let since = Infinity;
    if (clocked)
      for (let i = 0; i < items.length; i++) {
        const read = clock(items[i]!);
        if (out[i] !== undefined && read < since) since = read; // NaN (unread) is never below
      }
    // A part of the read failed (a Cluster master down): its NaNs are no invalidation (reported apart).
    let partly = false;
    const failedInPart = () => void (partly = true);
    const versions = !clocked
      ? await this.#calls.call('tagVersions', () => store.tagVersions!(unique), items, failedInPart)
      : Number.isFinite(since)
        ? await this.#calls.call('tagVersions', () => store.tagVersionsSince!(unique, since), items, failedInPart)
        : undefined;
    const byTag = new Map<string, number>();
    for (let i = 0; i < unique.length; i++) byTag.set(unique[i]!, versions?.[i] ?? NaN);
    for (let i = 0; i < items.length; i++) {
      const late = out[i];
      if (late?.tags === undefined) continue;
      const item = items[i]!;
      const unclocked = clocked && !Number.isFinite(clock(item)); // its clock could not be read: not stored
      if (versions === undefined || unclocked || partly) late.unreadable = true;
      late.versions = late.tags.map((tag) => {
        const at = item.tags?.indexOf(tag) ?? -1;
        return at >= 0 ? (item.versions?.[at] ?? NaN) : unclocked ? NaN : (byTag.get(tag) ?? NaN);
      });
    }
    return out;
  }
}

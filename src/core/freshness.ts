/**
 * The entry envelope and the arithmetic of time: ttl, grace (stale-while-revalidate), jitter.
 * Freshness lives inside the entry so a hit needs no second lookup (no PTTL round trip on Redis).
 */

/** What a store holds for one key. `value` is never `undefined` (undefined means "nothing to cache"). */
export interface Entry<V = unknown> {
  readonly value: V;
  /** Epoch ms until which the value is fresh. `Infinity`: never stale. */
  readonly freshUntil: number;
  /** Epoch ms until which the value may be served stale. Always `>= freshUntil`. `Infinity`: never expires. */
  readonly staleUntil: number;
  /** How long the fill that produced it took, in ms (for early refresh). */
  readonly fillMs?: number;
  /** Tags the value carries: invalidateTags() of any of them makes the entry a miss. */
  readonly tags?: readonly string[];
  /**
   * On a store with tag versions (Redis): each tag's version read before the fill started,
   * aligned with `tags`. The entry is valid only while every tag still has that version, so an
   * invalidation that lands during the fill is not undone by the fill's write.
   */
  readonly tagVersions?: readonly number[];
  /**
   * @internal The value as a settled promise, made on the first in-process hit and reused by
   * every later one (as DataLoader reuses its promises): a hit then allocates nothing. Never
   * encoded by a codec.
   */
  resolved?: Promise<unknown>;
  /**
   * @internal An in-process copy that may answer only before this time, fresh or not (a tiered
   * store's L1 copy: its l1Until). Judged by the registry with the clock read it makes anyway.
   */
  readonly servedUntil?: number;
  /**
   * @internal The value's estimated bytes by core/sizes' rules, when the code that built it
   * measured them (the response layer's walk): the memory store does not walk the value again.
   * Never encoded by a codec.
   */
  readonly valueBytes?: number;
}

/** Time source, injectable so tests move time instead of sleeping. Returns epoch milliseconds. */
export interface Clock {
  now(): number;
  /** Waits `ms` (the lock poll's backoff). Default: a real timer. A test clock advances itself instead. */
  sleep?(ms: number): Promise<void>;
}

/** The `process.emitWarning` code of a given clock whose now() threw or read no time. */
export const CLOCK_WARNING = 'HERDCACHE_CLOCK_FAILED';

/**
 * A clock given to createCache, read through a guard: a now() that throws, or returns no finite
 * number, after the check at creation (which refuses one that does so then) would fail the load
 * path wherever it is read, some steps of which cannot settle their callers from there (a
 * dispatch, a write): the load would hang and its key stay in flight. The guard answers the last
 * good reading instead (time stands still for that read) and warns once. A sleep() that throws
 * (or rejects) waits on a real timer instead.
 */
export function guardedClock(clock: Clock, first: number): Clock {
  let last = first;
  let warned = false;
  const failed = (what: string): number => {
    if (!warned) {
      warned = true;
      process.emitWarning(`herdcache: the clock given to createCache() ${what}; its last reading is used`, {
        code: CLOCK_WARNING,
      });
    }
    return last;
  };
  const guarded: Clock = {
    now(): number {
      let now: unknown;
      try {
        now = clock.now();
      } catch (error) {
        return failed(`threw (${error instanceof Error ? error.message : String(error)})`);
      }
      if (typeof now !== 'number' || !Number.isFinite(now)) return failed('returned no finite number of ms');
      return (last = now);
    },
  };
  const sleep = clock.sleep;
  if (sleep !== undefined) {
    const timer = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
    guarded.sleep = (ms: number): Promise<void> => {
      try {
        return Promise.resolve(sleep.call(clock, ms)).then(undefined, () => timer(ms));
      } catch {
        return timer(ms);
      }
    };
  }
  return guarded;
}

/** Date.now(), read on every call (looked up each time, so a test's fake Date is seen too). */
export const systemClock: Clock = { now: () => Date.now() };

/** How long the default clock's reading for a hit may be reused, in ms (see CoarseClock). */
export const CLOCK_RESOLUTION_MS = 1;
/** How many hits at most one reading of the default clock may judge (see CoarseClock). */
export const CLOCK_MAX_READS = 32;

/**
 * The clock a hit is judged by when the registry has no injected clock: `Date.now()` read at most
 * once per CLOCK_RESOLUTION_MS (as lru-cache's `ttlResolution`), and again after CLOCK_MAX_READS
 * reads of the same reading, whichever comes first. A reading is dropped by an unref'd timer of
 * `resolution` ms, which fires only when the event loop runs timers: a hot stretch of awaited hits
 * (microtasks, no timer in between) is bounded by the read count instead. So one reading judges
 * at most `maxReads` hits, and none once timers ran `resolution` ms after it; code that blocks the
 * event loop between two hits, with fewer hits in between, leaves it as old as the block.
 * A clock read costs a hit about as much as the lookup itself (~40 ns of ~100): this is what makes
 * an awaited hit close to a bare `await`. Only hits use it; fills, locks and invalidations read
 * the exact clock. An injected clock (`clock` option) is read on every hit, as before.
 */
export class CoarseClock implements Clock {
  #reading = 0;
  /** Reads the current reading may still answer; 0: read the source. */
  #left = 0;
  #timer = false;
  readonly #source: () => number;
  readonly #resolution: number;
  readonly #maxReads: number;
  readonly #expire = (): void => {
    this.#timer = false;
    this.#left = 0;
  };

  constructor(source: () => number = () => Date.now(), resolution = CLOCK_RESOLUTION_MS, maxReads = CLOCK_MAX_READS) {
    this.#source = source;
    this.#resolution = resolution;
    this.#maxReads = maxReads;
  }

  now(): number {
    if (this.#left > 0) {
      this.#left--;
      return this.#reading;
    }
    return this.#read();
  }

  #read(): number {
    const reading = this.#source();
    this.#reading = reading;
    this.#left = this.#maxReads - 1;
    if (!this.#timer) {
      this.#timer = true;
      const timer = setTimeout(this.#expire, this.#resolution);
      timer.unref?.();
    }
    return reading;
  }
}

export interface ManualClock extends Clock {
  advance(ms: number): void;
  set(ms: number): void;
  /** Every sleep asked of this clock, in order (the poll backoff, for tests). */
  readonly sleeps: number[];
  sleep(ms: number): Promise<void>;
}

/** A clock tests move by hand; its sleep advances virtual time and resolves on the next turn. */
export function manualClock(start = 1_700_000_000_000): ManualClock {
  let current = start;
  const sleeps: number[] = [];
  return {
    now: () => current,
    advance(ms: number) {
      current += ms;
    },
    set(ms: number) {
      current = ms;
    },
    sleeps,
    sleep(ms: number) {
      sleeps.push(ms);
      current += ms;
      return new Promise((resolve) => setImmediate(resolve));
    },
  };
}

/**
 * Multiplies `base` by a factor drawn uniformly from [1 - fraction, 1 + fraction].
 * Keys written together (a batch, a warm-up) then expire apart instead of stampeding together.
 * Unchecked (the registry's policy was checked when resolved; the public jitteredTtl, in
 * ./options, checks its arguments): an infinite `base` stays infinite.
 */
export function jittered(base: number, fraction: number): number {
  if (!Number.isFinite(fraction) || fraction <= 0 || !Number.isFinite(base)) return base;
  const f = fraction > 1 ? 1 : fraction;
  return base * (1 + f * (2 * Math.random() - 1));
}

/** Freshness policy resolved from options: all in milliseconds. */
export interface Freshness {
  /** `undefined`: never stale. */
  readonly ttl: number | undefined;
  /** Grace after ttl during which a stale value is served while one refresh runs. 0: no SWR. */
  readonly swr: number;
  readonly jitter: number;
  /** XFetch's beta; 0: no early refresh. */
  readonly beta: number;
}

/** Optional parts of an entry known only at write time. */
export interface EntryExtras {
  readonly fillMs?: number;
  readonly tags?: readonly string[];
  readonly tagVersions?: readonly number[];
  readonly valueBytes?: number;
}

export function makeEntry<V>(value: V, now: number, policy: Freshness, extras?: EntryExtras): Entry<V> {
  let freshUntil = Infinity;
  let staleUntil = Infinity;
  if (policy.ttl !== undefined) {
    freshUntil = now + jittered(policy.ttl, policy.jitter);
    staleUntil = freshUntil + policy.swr;
  }
  if (extras === undefined) return { value, freshUntil, staleUntil };
  const entry: { -readonly [P in keyof Entry<V>]: Entry<V>[P] } = { value, freshUntil, staleUntil };
  if (extras.fillMs !== undefined) entry.fillMs = extras.fillMs;
  if (extras.valueBytes !== undefined) entry.valueBytes = extras.valueBytes;
  if (extras.tags !== undefined && extras.tags.length > 0) {
    entry.tags = extras.tags;
    if (extras.tagVersions !== undefined) entry.tagVersions = extras.tagVersions;
  }
  return entry;
}

/**
 * XFetch: refresh a still-fresh entry early with a probability that grows as expiry nears and
 * with the cost of the last fill, so a hot key is recomputed by one reader before it expires
 * instead of by everyone after. `-log(random)` is an exponential draw with mean 1.
 */
export function refreshEarly(entry: Entry, now: number, beta: number): boolean {
  const fillMs = entry.fillMs;
  if (fillMs === undefined || fillMs <= 0) return false;
  return now - fillMs * beta * Math.log(Math.random()) >= entry.freshUntil;
}

/** Milliseconds a store should keep the entry physically: until the end of grace. */
export function physicalTtl(entry: Entry, now: number): number {
  return entry.staleUntil === Infinity ? Infinity : Math.max(1, Math.ceil(entry.staleUntil - now));
}

/**
 * The model and driver of the randomized no-stale-sets tests (test/core/no-stale-sets.test.ts for the
 * memory store, test/redis/no-stale-sets.test.ts for Redis and tiered): see the first file for what
 * is asserted and why. Two files so the two jest workers run them side by side.
 */
import { createCache, type Cache } from '../../../src/core/cache';
import { deferred, flush, type Deferred } from '../../helpers';

export const SEED = Number(process.env.HERDCACHE_SEED ?? 0x5eed);
export const SCHEDULE_STEPS = 24;
/** Longest a schedule may take to settle once its steps are done (far above what it needs). */
const DRAIN_DEADLINE = 5000;

/** mulberry32: small, fast, and the same sequence on every machine. */
export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!,
  };
}
export type Rng = ReturnType<typeof prng>;

export interface World {
  readonly name: string;
  readonly caches: Cache[];
  /** Lets queued work and I/O run a little (how much is drawn from rng). */
  settle(rng: Rng): Promise<void>;
  /** Lets everything in flight finish (a drain round). */
  idle(): Promise<void>;
  /** A token taken when cache `from` finished an invalidation... */
  mark(from: number): number;
  /** ...and whether cache `to` knows about it now. */
  knows(to: number, from: number, mark: number): boolean;
  close(): Promise<void>;
}

interface Value {
  v: number;
  id: number;
}

interface PendingFill {
  readonly id: number;
  readonly key: string;
  readonly version: number;
  readonly done: Deferred<Value>;
}

interface Constraint {
  readonly to: number;
  readonly from: number;
  readonly mark: number;
  readonly key: string;
  readonly version: number;
}

export interface Tally {
  schedules: number;
  steps: number;
  reads: number;
  fills: number;
  invalidations: number;
  /** Fills in flight when an invalidation of their key started: the races this test is about. */
  racingFills: number;
  coalescedStale: number;
  finalReads: number;
}

const TAGS_OF: Record<string, readonly string[] | undefined> = { k0: ['A'], k1: ['A', 'B'], k2: ['B'], k3: undefined };
const KEYS = Object.keys(TAGS_OF);

/** Runs one schedule; returns violations (empty when the model holds). */
async function schedule(world: World, rng: Rng, ns: string, tally: Tally): Promise<string[]> {
  const { caches } = world;
  const trace: string[] = [];
  const violations: string[] = [];
  const db = new Map<string, number>(KEYS.map((k) => [ns + k, 0]));
  const tagsOf = (key: string) => TAGS_OF[key.slice(ns.length)]?.map((tag) => ns + tag);
  const keysOfTag = (tag: string) => KEYS.filter((k) => TAGS_OF[k]?.includes(tag.slice(ns.length))).map((k) => ns + k);
  const pending: PendingFill[] = [];
  const waiting: Constraint[] = [];
  // Per cache, per key: the versions a read must reach, from invalidations done here and elsewhere.
  const local = caches.map(() => new Map<string, number>());
  const remote = caches.map(() => new Map<string, number>());
  let outstanding = 0;
  let fillSeq = 0;
  const current: { key: string; coalesced: boolean; cache?: number } = { key: '', coalesced: false };
  hooks.current = current;

  const fillOf =
    (cache: number) =>
    ({ key }: { key: string }) => {
      const fill: PendingFill = { id: ++fillSeq, key, version: db.get(key)!, done: deferred<Value>() };
      pending.push(fill);
      tally.fills++;
      trace.push(`  fill#${fill.id} starts on ${cache} for ${key.slice(ns.length)} at v${fill.version}`);
      return fill.done.promise;
    };

  const activate = () => {
    for (let i = waiting.length - 1; i >= 0; i--) {
      const c = waiting[i]!;
      if (!world.knows(c.to, c.from, c.mark)) continue;
      waiting.splice(i, 1);
      const table = c.to === c.from ? local[c.to]! : remote[c.to]!;
      table.set(c.key, Math.max(table.get(c.key) ?? 0, c.version));
    }
  };

  const read = (cache: number, key: string, final: boolean) => {
    activate();
    const needLocal = local[cache]!.get(key) ?? 0;
    const needRemote = remote[cache]!.get(key) ?? 0;
    const tags = tagsOf(key);
    current.key = key;
    current.coalesced = false;
    current.cache = cache;
    const promise = caches[cache]!.getOrCompute<Value>(key, fillOf(cache), tags === undefined ? undefined : { tags });
    const coalesced = current.coalesced;
    current.key = '';
    const step = `${final ? 'final ' : ''}read ${key.slice(ns.length)} on ${cache}${coalesced ? ' (joined a fill)' : ''} needs v${Math.max(needLocal, needRemote)}`;
    trace.push(step);
    outstanding++;
    promise.then(
      (value) => {
        outstanding--;
        tally.reads++;
        if (final) tally.finalReads++;
        trace.push(`  ${step} -> v${value.v} (fill#${value.id})`);
        if (value.v < needLocal || (value.v < needRemote && !(coalesced && !final))) {
          violations.push(`${step}: got v${value.v} from fill#${value.id}`);
        } else if (value.v < needRemote) {
          tally.coalescedStale++;
        }
      },
      () => {
        outstanding--; // a failed fill: errors are never cached, nothing to check
      },
    );
  };

  const invalidate = (cache: number, keys: string[], call: Promise<void>, label: string) => {
    tally.invalidations++;
    tally.racingFills += pending.filter((fill) => keys.includes(fill.key)).length;
    const versions = keys.map((key) => db.get(key)!);
    trace.push(
      `${label} on ${cache} (db now ${keys.map((k, i) => `${k.slice(ns.length)}=v${versions[i]}`).join(' ')})`,
    );
    outstanding++;
    call.then(
      () => {
        outstanding--;
        trace.push(`  ${label} on ${cache} done`);
        for (let to = 0; to < caches.length; to++) {
          const mark = world.mark(cache);
          keys.forEach((key, i) => waiting.push({ to, from: cache, mark, key, version: versions[i]! }));
        }
      },
      (error: unknown) => {
        outstanding--;
        violations.push(`${label} failed: ${String(error)}`);
      },
    );
  };

  for (let step = 0; step < SCHEDULE_STEPS; step++) {
    tally.steps++;
    const roll = rng.next();
    const cache = rng.int(caches.length);
    if (roll < 0.38) {
      read(cache, ns + rng.pick(KEYS), false);
    } else if (roll < 0.62) {
      if (pending.length > 0) {
        const fill = pending.splice(rng.int(pending.length), 1)[0]!;
        if (rng.next() < 0.1) {
          trace.push(`fill#${fill.id} fails`);
          fill.done.reject(new Error('fill failed'));
        } else {
          trace.push(`fill#${fill.id} ends with v${fill.version}`);
          fill.done.resolve({ v: fill.version, id: fill.id });
        }
      }
    } else if (roll < 0.74) {
      const key = ns + rng.pick(KEYS);
      db.set(key, db.get(key)! + 1);
      invalidate(cache, [key], caches[cache]!.invalidate(key), `invalidate ${key.slice(ns.length)}`);
    } else if (roll < 0.86) {
      const tag = ns + rng.pick(['A', 'B']);
      const keys = keysOfTag(tag);
      for (const key of keys) db.set(key, db.get(key)! + 1);
      invalidate(cache, keys, caches[cache]!.invalidateTags([tag]), `invalidateTags ${tag.slice(ns.length)}`);
    }
    // Sometimes nothing runs between steps (they land in one tick), sometimes I/O does.
    await world.settle(rng);
  }

  // Drain: every fill ends, every read and invalidation completes.
  // Bounded by time, not by rounds: under load a lock poll (a 1 ms timer) or a reply can take a while.
  const drain = async () => {
    const deadline = Date.now() + DRAIN_DEADLINE;
    for (;;) {
      for (const fill of pending.splice(0)) fill.done.resolve({ v: fill.version, id: fill.id });
      await world.idle();
      if (outstanding === 0 && pending.length === 0) return;
      if (Date.now() > deadline) break;
    }
    violations.push(
      `did not drain within ${DRAIN_DEADLINE} ms: ${outstanding} outstanding, ${pending.length} fills pending`,
    );
  };
  await drain();
  // Once every replica knows every invalidation, what is cached anywhere must be current.
  const heardBy = Date.now() + DRAIN_DEADLINE;
  while (waiting.length > 0 && Date.now() < heardBy) {
    activate();
    if (waiting.length > 0) await world.idle();
  }
  if (waiting.length > 0) violations.push(`${waiting.length} invalidations never reached their replica`);
  for (let cache = 0; cache < caches.length; cache++) for (const key of KEYS) read(cache, ns + key, true);
  await drain();
  tally.schedules++;
  return violations.length === 0 ? [] : [...violations, '--- trace:', ...trace];
}

/** Set by the hooks of every cache: whether the read being issued joined a fill in flight. */
const hooks: { current: { key: string; coalesced: boolean; cache?: number } | undefined } = { current: undefined };

export function observedCache(index: number, options: Parameters<typeof createCache>[0]): Cache {
  return createCache({
    ttl: Infinity,
    ...options,
    hooks: {
      onCoalesced: (key) => {
        const current = hooks.current;
        if (current !== undefined && current.key === key && current.cache === index) current.coalesced = true;
      },
    },
  });
}

/**
 * How many schedules a world runs. By default, up to `max` within `budgetMs` of wall clock and at
 * least `min` whatever the time: a loaded machine (a shared CI runner, two CPU hogs) runs fewer
 * schedules of the same seeded sequence instead of timing out, and the floor keeps the run
 * meaningful. HERDCACHE_NSS_SCHEDULES=n runs exactly n, unbudgeted: the long form.
 */
export interface ScheduleBudget {
  readonly min: number;
  /** ...and at least this many racing fills (a starved machine races less per schedule). */
  readonly minRacingFills: number;
  readonly max: number;
  readonly budgetMs: number;
}

export const LONG_FORM =
  process.env.HERDCACHE_NSS_SCHEDULES === undefined ? undefined : Number(process.env.HERDCACHE_NSS_SCHEDULES);

/** Jest's timeout for a budgeted world: the floor alone must fit on a starved machine. */
export function timeoutFor(budget: ScheduleBudget): number {
  return LONG_FORM === undefined ? budget.budgetMs + 60_000 : 3_600_000;
}

export async function run(world: World, budget: ScheduleBudget, seed: number): Promise<Tally> {
  const tally: Tally = {
    schedules: 0,
    steps: 0,
    reads: 0,
    fills: 0,
    invalidations: 0,
    racingFills: 0,
    coalescedStale: 0,
    finalReads: 0,
  };
  const rng = prng(seed);
  const schedules = LONG_FORM ?? budget.max;
  const until = LONG_FORM === undefined ? Date.now() + budget.budgetMs : Infinity;
  for (let n = 0; n < schedules; n++) {
    if (n >= budget.min && tally.racingFills >= budget.minRacingFills && Date.now() > until) break;
    const violations = await schedule(world, rng, `s${n}:`, tally);
    if (violations.length > 0) {
      throw new Error(
        `${world.name}: stale value in schedule ${n} (seed ${seed}):\n${violations.slice(0, 200).join('\n')}`,
      );
    }
  }
  return tally;
}

/** Lets Redis answer: sometimes not at all (same tick), sometimes a turn, sometimes a round trip. */
export function ioSettle(rng: Rng): Promise<void> {
  const roll = rng.next();
  if (roll < 0.3) return Promise.resolve();
  if (roll < 0.6) return flush(1);
  // A loopback round trip is ~0.1 ms: a few turns of the loop let replies in.
  return flush(roll < 0.9 ? 5 : 20);
}

export const ioIdle = () => flush(10);

/** Fast lock polls: a replica waiting on another's fill retries every ms (the deadline is never reached). */
export const pollingClock = { now: Date.now, sleep: () => new Promise<void>((resolve) => setTimeout(resolve, 1)) };
export const lockOptions = { lockTtl: 60_000, lockWaitTimeout: 60_000, lockPollInterval: 1 };

export type Tallies = Record<string, Tally & { ms: number }>;

export function report(tallies: Tallies): void {
  console.log(
    `no stale sets:\n${Object.entries(tallies)
      .map(([name, t]) => `  ${name}: ${JSON.stringify(t)}`)
      .join('\n')}`,
  );
}

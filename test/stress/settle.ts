/**
 * Every promise herdcache returns settles, whatever the interleaving: a seeded random stress over
 * every public path of the core, with a watchdog that names each operation still pending and the
 * seed that replays it. Used by test/stress/settle.test.ts (quick) and by `npm run chaos` (long).
 *
 * One run: a cache on the chosen store (memory, Redis, tiered), three loaders (per-tick batching,
 * a batchScheduleFn window, tags + swr + early refresh), and a stream of operations drawn from the
 * seed: shared and scoped load / loadMany / read / prime / clear / clearAll, getOrCompute shared
 * and scoped, invalidate, invalidateTags, cache.clear, clock moves, new requests (some with a request signal).
 * Each load may carry a signal aborted before
 * the call, in a microtask, in a later tick or in a timer; fills answer values, Error results,
 * throw, or fail the whole batch, synchronously or after a timer, or run on until their signal fires
 * (up to 30 ms: abandoned while running, a refresh past its grace, a Redis lock let go). Operations are issued in bursts
 * separated by a microtask, a tick or a short timer, so they overlap in every way those allow.
 *
 * 'flaky' is the memory store (the user's own store, here a stand-in) failing a fifth of its calls,
 * at once or after a timer: every load still settles (computed without the store), and once the
 * store is well again the invalidations it refused reach it (nothing left pending).
 *
 * Checked: every promise settles before the deadline; a value is always the value of the key
 * asked for; no rejection goes unhandled inside the library; nothing is left in flight; no
 * invalidation is left waiting for a retry once the store answers.
 */
import type Redis from 'ioredis';
import {
  createCache,
  manualClock,
  memoryStore,
  type Cache,
  type Loader,
  type RequestScope,
  type Store,
} from '../../src/core';
import { redisStore, tieredStore } from '../../src/redis';
import { StorePartialError } from '../../src/core/errors';

export type StressStore = 'memory' | 'redis' | 'tiered' | 'flaky';

export interface StressOptions {
  seed: number;
  /** Operations issued. */
  ops: number;
  store: StressStore;
  /** Redis connections, for 'redis' and 'tiered' (the caller owns and closes them). */
  client?: Redis;
  subscriber?: Redis;
  /** Longest wait for every operation to settle once all were issued. */
  deadlineMs?: number;
}

export interface StressReport {
  seed: number;
  store: StressStore;
  issued: number;
  resolved: number;
  rejected: number;
  /** Operations still pending at the deadline, described (op, key, signal plan). Must be empty. */
  pending: string[];
  /** Values answered for the wrong key, or of the wrong shape. Must be empty. */
  wrong: string[];
  /** Rejections nobody could handle (raised inside the library). Must be empty. */
  unhandled: string[];
  /** Flights still open once everything settled. Must be 0. */
  inFlightAfter: number;
  /** Invalidations still waiting for a retry once the store is well again (keys + tags + clear). Must be 0. */
  pendingInvalidationsAfter: number;
  /** Store calls that failed (the flaky store's: a run that failed none tests little). */
  storeErrors: number;
  /** Invalidations waiting for a retry when the store got well (then sent: pendingInvalidationsAfter). */
  pendingAtRecovery: number;
  /**
   * The most invalidations seen waiting for a retry during the run (the flaky store: retries were
   * exercised; at recovery they may all have been sent already, on a slow machine).
   */
  pendingSeen: number;
  /** Loads that found a key's fill lock held by the other cache (redis: the peer's contention). */
  lockContended: number;
}

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SIGNAL_PLANS = ['none', 'none', 'none', 'before', 'microtask', 'tick', 'timer'] as const;
type SignalPlan = (typeof SIGNAL_PLANS)[number];

/** What a fill or a batch does with one key. */
const KEY_PLANS = ['value', 'value', 'value', 'value', 'error', 'throw'] as const;

export async function settleStress(options: StressOptions): Promise<StressReport> {
  const { seed, ops, deadlineMs = 20_000 } = options;
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const chance = (p: number) => random() < p;
  const clock = manualClock(1_700_000_000_000);
  const prefix = `settle:${seed}:${Math.floor(Math.random() * 1e9)}:`;
  // The flaky store's failures: drawn from their own sequence, so the operations stay the seed's.
  const failures = { on: options.store === 'flaky', random: prng(seed ^ 0x5eed) };
  const cache = createCache({
    clock,
    store: options.store === 'flaky' ? flaky(memoryStore(), failures) : makeStore(options, prefix, clock),
    lockWaitTimeout: 2000,
    lockPollInterval: 5,
  });

  let version = 0;
  /** After a random delay (or none), per the seed: fills and batches answer at varied times. */
  const later = async () => {
    const wait = random();
    if (wait < 0.3) return;
    if (wait < 0.6) await Promise.resolve();
    else if (wait < 0.8) await new Promise<void>((resolve) => setImmediate(resolve));
    else await new Promise<void>((resolve) => setTimeout(resolve, Math.floor(random() * 3)));
  };
  /**
   * Sometimes a fill runs on past its callers (a slow database call): until its signal fires (then
   * it rejects, as one that listens does) or 30 ms pass. Its callers that leave abandon it (a
   * refresh too, past its grace), and on Redis its lock goes at once.
   */
  const lingering = async (signal: AbortSignal): Promise<void> => {
    if (!chance(0.05)) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 30);
      signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason as Error)), { once: true });
    });
  };
  const answer = (source: string, key: string): string | Error => {
    const plan = pick(KEY_PLANS);
    if (plan === 'throw') throw new Error(`${source} threw for ${key}`);
    if (plan === 'error') return new Error(`${source} has no ${key}`);
    return `${source}|${key}|v${++version}`;
  };
  const batchOf =
    (source: string) =>
    async (keys: readonly string[], { signal }: { signal: AbortSignal }) => {
      await later();
      await lingering(signal);
      if (chance(0.08)) throw new Error(`${source}: the whole batch failed`);
      if (chance(0.03)) return keys.slice(1).map((key) => `${source}|${key}|short`); // wrong length: a whole-batch failure
      const values = keys.map((key) => {
        try {
          return answer(source, key);
        } catch (error) {
          return error as Error;
        }
      });
      if (!chance(0.2)) return values;
      // A promise per key (`ids.map(async …)`), some settling later, a failed key's rejecting.
      return values.map((value) =>
        chance(0.5) ? value : later().then(() => (value instanceof Error ? Promise.reject(value) : value)),
      );
    };
  const loadersOf = (cache: Cache): Loader<string, string>[] => [
    cache.loader<string, string>({ name: 'tick', ttl: 1000, batch: batchOf('tick') }),
    cache.loader<string, string>({
      name: 'window',
      ttl: 500,
      batchScheduleFn: (dispatch) => setTimeout(dispatch, Math.floor(random() * 3)),
      batch: batchOf('window'),
    }),
    cache.loader<string, string>({
      name: 'tagged',
      ttl: 800,
      swr: 2000,
      earlyRefresh: true,
      tags: (id) => [`T:${Number(id.slice(1)) % 3}`],
      batch: batchOf('tagged'),
    }),
    cache.loader<string, string>({ name: 'coalesce', batch: batchOf('coalesce') }),
  ];
  const loaders = loadersOf(cache);
  // On Redis, a second cache on the same keys (a replica, in this process): its loads and the
  // first cache's contend for the fill locks, so lock waits, announcements (with values) and the
  // releases of failed or abandoned fills interleave with everything else.
  const peer =
    options.store === 'redis'
      ? createCache({
          clock,
          store: makeStore({ ...options, subscriber: undefined }, prefix, clock),
          lockWaitTimeout: 2000,
          lockPollInterval: 5,
        })
      : undefined;
  const peerLoaders = peer === undefined ? [] : loadersOf(peer);
  const keyOf = () => `k${Math.floor(random() * 6)}`;

  const report: StressReport = {
    seed,
    store: options.store,
    issued: 0,
    resolved: 0,
    rejected: 0,
    pending: [],
    wrong: [],
    unhandled: [],
    inFlightAfter: 0,
    pendingInvalidationsAfter: 0,
    storeErrors: 0,
    pendingAtRecovery: 0,
    pendingSeen: 0,
    lockContended: 0,
  };
  const pending = new Map<number, string>();
  const onUnhandled = (reason: unknown) => report.unhandled.push(describe(reason));
  process.on('unhandledRejection', onUnhandled);

  /** Tracks a promise (or a value) an operation returned; checks what it resolves to. */
  const track = (what: string, result: unknown, check?: (value: unknown) => string | undefined) => {
    report.issued++;
    if (!(result instanceof Promise)) {
      if (check !== undefined) note(check(result));
      report.resolved++;
      return;
    }
    const id = report.issued;
    pending.set(id, what);
    result.then(
      (value: unknown) => {
        pending.delete(id);
        report.resolved++;
        if (check !== undefined) note(check(value));
      },
      () => {
        pending.delete(id);
        report.rejected++;
      },
    );
  };
  const note = (problem: string | undefined) => {
    if (problem !== undefined && report.wrong.length < 20) report.wrong.push(problem);
  };
  /** A value answered for `key` must be that key's (a fill's, a batch's or a prime's). */
  const valueOf = (key: string, what: string) => (value: unknown) =>
    typeof value === 'string' && value.split('|')[1] === key ? undefined : `${what} answered ${describe(value)}`;
  const manyOf = (keys: string[], what: string) => (values: unknown) =>
    Array.isArray(values) && values.length === keys.length
      ? values.map((v, i) => (v instanceof Error ? undefined : valueOf(keys[i]!, what)(v))).find((p) => p !== undefined)
      : `${what} answered ${describe(values)}`;

  const signalFor = (plan: SignalPlan): AbortSignal | undefined => {
    if (plan === 'none') return undefined;
    const controller = new AbortController();
    const reason = new Error(`aborted (${plan})`);
    if (plan === 'before') controller.abort(reason);
    else if (plan === 'microtask') queueMicrotask(() => controller.abort(reason));
    else if (plan === 'tick') setImmediate(() => controller.abort(reason));
    else setTimeout(() => controller.abort(reason), Math.floor(random() * 4));
    return controller.signal;
  };

  let scope: RequestScope = cache.request();
  const views = () => {
    const loader = pick(loaders);
    const view = pick(['default', 'default', 'nocache', 'cacheMap'] as const);
    const scoped =
      view === 'default'
        ? scope.loader(loader)
        : view === 'nocache'
          ? scope.loader(loader, { cache: false })
          : scope.loader(loader, { cacheMap: new Map() });
    return { loader, scoped, label: `${loader.name}/${view}` };
  };
  const fillFor =
    (key: string) =>
    async ({ signal }: { signal: AbortSignal }) => {
      await later();
      await lingering(signal);
      // Sometimes the fill invalidates its own key (a repair job, a helper that writes): its callers
      // start over at most twice, then get a detached flight's result (core/flight.ts).
      if (chance(0.1)) await cache.invalidate(`c:${key}`);
      const result = answer('compute', key);
      if (result instanceof Error && chance(0.5)) throw result;
      return result;
    };

  /** A load of the peer (redis): drawn as often as two other operations, so locks are contended. */
  const peerLoad = () => {
    if (peer === undefined) return;
    const key = keyOf();
    const plan = pick(SIGNAL_PLANS);
    if (chance(0.5)) {
      const loader = pick(peerLoaders);
      track(
        `peer ${loader.name} load ${key} signal:${plan}`,
        loader.load(key, { signal: signalFor(plan) }),
        valueOf(key, 'peer load'),
      );
    } else
      track(
        `peer getOrCompute ${key} signal:${plan}`,
        peer.getOrCompute(`c:${key}`, fillFor(key), { ttl: 1000, signal: signalFor(plan) }),
        valueOf(key, 'peer getOrCompute'),
      );
  };

  const operations: (() => void)[] = [
    peerLoad,
    peerLoad,
    () => {
      const { scoped, label } = views();
      const key = keyOf();
      const plan = pick(SIGNAL_PLANS);
      track(
        `scoped ${label} load ${key} signal:${plan}`,
        scoped.load(key, { signal: signalFor(plan) }),
        valueOf(key, 'scoped load'),
      );
    },
    () => {
      const { scoped, label } = views();
      const keys = [keyOf(), keyOf(), keyOf()];
      const plan = pick(SIGNAL_PLANS);
      track(
        `scoped ${label} loadMany ${keys} signal:${plan}`,
        scoped.loadMany(keys, { signal: signalFor(plan) }),
        manyOf(keys, 'scoped loadMany'),
      );
    },
    () => {
      const { scoped, label } = views();
      const key = keyOf();
      track(`scoped ${label} read ${key}`, scoped.read(key), valueOf(key, 'scoped read'));
    },
    () => {
      const { scoped } = views();
      const key = keyOf();
      scoped.prime(key, chance(0.3) ? new Error(`primed error ${key}`) : `prime|${key}|p`);
    },
    () => (chance(0.5) ? views().scoped.clear(keyOf()) : views().scoped.clearAll()),
    () => {
      const loader = pick(loaders);
      const key = keyOf();
      const plan = pick(SIGNAL_PLANS);
      track(
        `shared ${loader.name} load ${key} signal:${plan}`,
        loader.load(key, { signal: signalFor(plan) }),
        valueOf(key, 'shared load'),
      );
    },
    () => {
      const loader = pick(loaders);
      const keys = [keyOf(), keyOf()];
      const plan = pick(SIGNAL_PLANS);
      track(
        `shared ${loader.name} loadMany ${keys} signal:${plan}`,
        loader.loadMany(keys, { signal: signalFor(plan) }),
        manyOf(keys, 'shared loadMany'),
      );
    },
    () => {
      const loader = pick(loaders);
      const key = keyOf();
      track(`shared ${loader.name} read ${key}`, loader.read(key), valueOf(key, 'shared read'));
    },
    () => {
      const loader = pick(loaders);
      const key = keyOf();
      // Sometimes a promise of the value (settling later, or rejecting: nothing primed).
      const value = `prime|${key}|shared`;
      const given = !chance(0.3)
        ? value
        : later().then(() => (chance(0.3) ? Promise.reject(new Error(`prime source ${key} down`)) : value));
      track(`shared ${loader.name} prime ${key}`, loader.prime(key, given as unknown as string));
    },
    () => {
      const loader = pick(loaders);
      track(`shared ${loader.name} clear`, chance(0.5) ? loader.clear(keyOf()) : loader.clearMany([keyOf(), keyOf()]));
    },
    () => {
      const key = keyOf();
      const plan = pick(SIGNAL_PLANS);
      const policy = pick([
        { ttl: 1000 },
        { ttl: 500, swr: 2000, tags: [`T:${key.slice(1)}`] },
        // Other tags for the same key: a caller joining another's fill adds its own (FlightTable.joinTags).
        { ttl: 1000, tags: [`T:${Number(key.slice(1)) % 3}`] },
        { ttl: 800, earlyRefresh: true },
        // Without the fill lock: on Redis, its write is gathered with the turn's others (turn-sets.ts).
        { ttl: 1000, lock: false },
        {},
      ]);
      track(
        `getOrCompute ${key} ${JSON.stringify(policy)} signal:${plan}`,
        cache.getOrCompute(`c:${key}`, fillFor(key), { ...policy, signal: signalFor(plan) }),
        valueOf(key, 'getOrCompute'),
      );
    },
    () => {
      const key = keyOf();
      const plan = pick(SIGNAL_PLANS);
      track(
        `scope.getOrCompute ${key} signal:${plan}`,
        scope.getOrCompute(`c:${key}`, fillFor(key), { ttl: 1000, signal: signalFor(plan) }),
        valueOf(key, 'scope.getOrCompute'),
      );
    },
    () =>
      track(
        'invalidate',
        cache.invalidate(chance(0.5) ? `c:${keyOf()}` : [pick(loaders).storeKey(keyOf()), `c:${keyOf()}`]),
      ),
    () => {
      // One tag, or two (which the flaky store may take only in part: a Cluster master down).
      const tag = Math.floor(random() * 3);
      track('invalidateTags', cache.invalidateTags(chance(0.5) ? [`T:${tag}`] : [`T:${tag}`, `T:${(tag + 1) % 3}`]));
    },
    () => {
      // Rarely: a whole clear, abandoning every fill in flight (on the flaky store, maybe retried).
      if (chance(0.2)) track('clear', cache.clear());
    },
    () => clock.advance(Math.floor(random() * 1500)),
    () => {
      // A new request; some carry a signal of their own (a client that may leave mid-request).
      const plan = chance(0.4) ? pick(SIGNAL_PLANS) : 'none';
      scope = plan === 'none' ? cache.request() : cache.request({ signal: signalFor(plan) });
    },
  ];

  for (let issued = 0; issued < ops;) {
    const burst = 1 + Math.floor(random() * 8);
    for (let i = 0; i < burst && issued < ops; i++, issued++) pick(operations)();
    const waiting = cache.pendingInvalidations;
    report.pendingSeen = Math.max(report.pendingSeen, waiting.keys + waiting.tags + (waiting.clear ? 1 : 0));
    const pause = random();
    if (pause < 0.4) await Promise.resolve();
    else if (pause < 0.75) await new Promise<void>((resolve) => setImmediate(resolve));
    else await new Promise<void>((resolve) => setTimeout(resolve, Math.floor(random() * 3)));
  }

  // The watchdog: wait for every operation, up to the deadline, then name what is left.
  const deadline = Date.now() + deadlineMs;
  while (pending.size > 0 && Date.now() < deadline) await new Promise<void>((resolve) => setTimeout(resolve, 5));
  report.pending = [...pending.values()].slice(0, 20).map((what) => `${what} (seed ${seed}, ${options.store})`);
  // Background refreshes started by the last reads finish on their own: wait for them too.
  const inFlight = () => cache.inFlight + (peer?.inFlight ?? 0);
  while (inFlight() > 0 && Date.now() < deadline) await new Promise<void>((resolve) => setTimeout(resolve, 5));
  report.inFlightAfter = inFlight();
  // The store is well again: what it refused is sent by the retries (the first within 250 ms).
  failures.on = false;
  report.storeErrors = cache.metrics().total.storeErrors;
  const pendingAtRecovery = cache.pendingInvalidations;
  report.pendingAtRecovery = pendingAtRecovery.keys + pendingAtRecovery.tags + (pendingAtRecovery.clear ? 1 : 0);
  const waiting = () => {
    const { keys, tags, clear } = cache.pendingInvalidations;
    return keys + tags + (clear ? 1 : 0);
  };
  const drained = Date.now() + 10_000;
  while (waiting() > 0 && Date.now() < drained) await new Promise<void>((resolve) => setTimeout(resolve, 20));
  report.pendingInvalidationsAfter = waiting();
  report.lockContended = cache.metrics().total.lockContended + (peer?.metrics().total.lockContended ?? 0);
  await new Promise<void>((resolve) => setImmediate(resolve));
  process.off('unhandledRejection', onUnhandled);
  if (options.store !== 'memory') await cache.clear().catch(() => {});
  await cache.close(); // detaches from the caller's connections (which it never quits)
  await peer?.close(); // and closes the subscriber its store opened
  return report;
}

function makeStore(options: StressOptions, prefix: string, clock: { now(): number }): Store {
  if (options.store === 'memory') return memoryStore();
  if (options.client === undefined) throw new Error(`settleStress: store '${options.store}' needs a client`);
  const l2 = redisStore({
    client: options.client,
    prefix,
    ...(options.subscriber && options.store === 'redis' ? { subscriber: options.subscriber } : {}),
  });
  if (options.store === 'redis') return l2;
  if (options.subscriber === undefined) throw new Error("settleStress: store 'tiered' needs a subscriber");
  return tieredStore({ l2, subscriber: options.subscriber, l1: memoryStore({ max: 1000 }), clock });
}

/** A store failing a fifth of its calls while `failures.on`: at once, or after a timer (a timeout). */
function flaky(inner: Store, failures: { on: boolean; random: () => number }): Store {
  const maybe = <T>(op: string, call: () => Promise<T>): Promise<T> => {
    if (!failures.on || failures.random() >= 0.2) return call();
    const error = new Error(`flaky store: ${op} failed`);
    return failures.random() < 0.5
      ? Promise.reject(error)
      : new Promise<T>((_, reject) => setTimeout(() => reject(error), 1));
  };
  // No getSync: every read goes through a call that may fail.
  return {
    name: 'flaky',
    getMany: (keys) => maybe('getMany', () => inner.getMany(keys)),
    setMany: (writes) => maybe('setMany', () => inner.setMany(writes)),
    delete: (keys, options) => maybe('delete', () => inner.delete(keys, options)),
    // Several tags: sometimes only the first taken, the rest failed (StorePartialError, as a
    // Cluster whose master of the others is down): the registry sends the failed part again.
    invalidateTags: async (tags) => {
      if (failures.on && tags.length > 1 && failures.random() < 0.1) {
        await inner.invalidateTags!(tags.slice(0, 1));
        const failedAt = tags.slice(1).map((_, i) => i + 1);
        throw new StorePartialError(
          new Error('flaky store: part of invalidateTags failed'),
          undefined,
          'partial',
          failedAt,
        );
      }
      return maybe('invalidateTags', () => inner.invalidateTags!(tags));
    },
    clear: () => maybe('clear', () => inner.clear()),
  };
}

function describe(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Used by callers to print one line per run. */
export function summary(report: StressReport): string {
  return `${report.store} seed ${report.seed}: ${report.issued} ops, ${report.resolved} resolved, ${report.rejected} rejected, ${report.pending.length} pending, ${report.wrong.length} wrong, ${report.unhandled.length} unhandled, ${report.inFlightAfter} in flight after, ${report.pendingInvalidationsAfter} invalidations pending after`;
}

export type { Cache };

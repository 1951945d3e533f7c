/**
 * herdcacheMetrics(): the cache's own counters and the stores' health in Prometheus, for every
 * user (getOrCompute, loaders outside GraphQL, any server), not only per GraphQL operation.
 *
 * Nothing is counted twice and nothing runs per load: each metric has a collect() callback that
 * reads a snapshot (cache.metrics(), cache.inFlight, a store's breakerState, nodeHealth(),
 * waitStats() or stats()) when Prometheus scrapes. Label cardinality is bounded: `source` values
 * come from code (loader names, field coordinates, getOrCompute labels) and the first `maxSources`
 * are kept, the rest summed as "other"; `store` values are the names of the stores given; `state`
 * has three values; `node` values are a Redis Cluster's master addresses, the first `maxNodes` per
 * store kept, the rest summed as "other" (a cluster has a few masters; failovers and resharding
 * add addresses).
 */
import type { Counter, Gauge, Registry } from 'prom-client';
import type { Cache } from '../core/cache';
import { HerdcacheError, invalidOption } from '../core/errors';
import { COUNTER_NAMES, type CounterName } from '../core/metrics';
import { checkKnownKeys, checkPositiveInteger, optionNames } from '../core/options';
import type { Store } from '../core/store';
import type { Counters } from '../core/types';
import { type PromClient, checkPromClient, checkRegistry, loadPromClient } from './metrics';

export interface HerdcacheMetricsOptions {
  cache: Cache;
  /** Where the metrics are registered. Nothing goes to prom-client's global registry. */
  registry: Registry;
  /**
   * Stores whose health to expose, labelled by their name: a redisStore's circuit breaker, a
   * tieredStore's L1 and pub/sub stats. For a tiered store pass it and its L2: `[tiered, l2]`.
   */
  stores?: readonly Store[];
  /** Distinct `source` label values kept; later ones are summed as "other". Default 100. */
  maxSources?: number;
  /** Distinct `node` label values (Cluster masters) kept per store; later ones are summed as "other". Default 64. */
  maxNodes?: number;
  /** The prom-client module. Default: `import('prom-client')`. */
  client?: PromClient;
}

/** Metric name per counter of cache.metrics(); all labelled {source}. */
export const CACHE_COUNTER_METRICS = {
  hits: ['herdcache_cache_hits_total', 'Loads answered with a fresh value from the store.'],
  misses: [
    'herdcache_cache_misses_total',
    'Loads that found nothing usable and started a fill (or a wait on another process).',
  ],
  coalesced: ['herdcache_cache_coalesced_total', 'Loads that joined a fill already in flight in this process.'],
  staleServed: [
    'herdcache_cache_stale_served_total',
    'Loads answered with a stale value within grace while a refresh ran.',
  ],
  fills: ['herdcache_cache_fills_total', 'Keys computed successfully by a fill or batch function.'],
  fillFailures: ['herdcache_cache_fill_failures_total', 'Keys whose fill failed (nothing cached).'],
  batches: ['herdcache_cache_batches_total', 'Batch function calls.'],
  batchedKeys: ['herdcache_cache_batched_keys_total', 'Keys sent to batch functions.'],
  refreshes: ['herdcache_cache_refreshes_total', 'Background refreshes started.'],
  refreshesDropped: [
    'herdcache_cache_refreshes_dropped_total',
    'Background refreshes dropped at the maxRefreshes cap.',
  ],
  lockAcquired: ['herdcache_cache_lock_acquired_total', 'Fill locks won.'],
  lockContended: ['herdcache_cache_lock_contended_total', 'Fill lock attempts that found another process filling.'],
  lockTimeouts: [
    'herdcache_cache_lock_timeouts_total',
    'Waits on another process that reached lockWaitTimeout and filled locally.',
  ],
  storeErrors: ['herdcache_cache_store_errors_total', 'Store calls that failed (the load went on without the store).'],
  encodeErrors: [
    'herdcache_cache_encode_errors_total',
    'Values that could not be encoded for the store (returned, not cached).',
  ],
  decodeErrors: ['herdcache_cache_decode_errors_total', 'Stored entries that could not be decoded (read as misses).'],
  invalidations: ['herdcache_cache_invalidations_total', 'Keys and tags invalidated.'],
} as const satisfies Record<CounterName, readonly [string, string]>;

export const IN_FLIGHT_METRIC = 'herdcache_fills_in_flight';
export const BREAKER_METRIC = 'herdcache_store_breaker_state';
const BREAKER_STATES = ['closed', 'open', 'half-open'] as const;

/** tieredStore's stats(): gauges for what is a level, counters for what only grows. */
const TIERED_GAUGES = {
  subscribed: ['herdcache_tiered_subscribed', '1 while this replica hears the others over pub/sub, else 0.'],
  l1Size: ['herdcache_tiered_l1_entries', 'Entries in the in-process L1.'],
} as const;
const TIERED_COUNTERS = {
  published: ['herdcache_tiered_published_total', 'Invalidation messages published.'],
  publishFailures: ['herdcache_tiered_publish_failures_total', 'PUBLISH calls that failed (L1 emptied).'],
  received: ['herdcache_tiered_received_total', "Other replicas' messages applied."],
  l1Clears: ['herdcache_tiered_l1_clears_total', 'Times the whole L1 was emptied.'],
  promoted: ['herdcache_tiered_promoted_total', 'L2 entries copied into L1.'],
  refused: [
    'herdcache_tiered_refused_total',
    'L2 entries refused by L1 (changed meanwhile, tag versions not current).',
  ],
} as const;

/** A redisStore's nodeHealth(): per Cluster master, {store,node,state} and {store,node}. */
export const NODE_BREAKER_METRIC = 'herdcache_store_node_breaker_state';
export const NODE_FAILURES_METRIC = 'herdcache_store_node_failures_total';
/** A redisStore's waitStats() (stores given a subscriber): waits on other replicas' fill locks. */
export const LOCK_WAITS_METRIC = 'herdcache_redis_lock_waits_total';
const WAIT_OUTCOMES = ['woken', 'polled'] as const;
const WAIT_GAUGES = {
  listening: [
    'herdcache_redis_announcements_listening',
    "1 while the store's subscriber connection is up (fill announcements heard), else 0.",
  ],
  channels: [
    'herdcache_redis_announcement_channels',
    'Announcement channels subscribed (standalone: at most 1; Cluster: one per slot waited on).',
  ],
} as const;
const WAIT_COUNTERS = {
  deaf: [
    'herdcache_redis_lock_waits_deaf_total',
    "Waits begun while their key's channel was not subscribed: they could only poll.",
  ],
  received: [
    'herdcache_redis_announcements_received_total',
    'Fill announcements received for keys this process was waiting on.',
  ],
} as const;

export const DEFAULT_MAX_SOURCES = 100;
export const DEFAULT_MAX_NODES = 64;

interface BreakerStore extends Store {
  readonly breakerState: string;
}
interface StatsStore extends Store {
  stats(): Record<string, number | boolean>;
}
interface NodeHealthStore extends Store {
  nodeHealth(): Record<string, { readonly breaker: string; readonly failures: number }>;
}
interface WaitStatsStore extends Store {
  waitStats(): { readonly enabled: boolean } & Record<string, number | boolean>;
}

/** What herdcacheMetrics() registered; `close()` removes it from the registry. */
export interface HerdcacheCollectors {
  /** Metric names registered. */
  readonly names: readonly string[];
  close(): void;
}

const perRegistry = new WeakMap<Registry, { cache: Cache; collectors: HerdcacheCollectors }>();

const HERDCACHE_METRICS_OPTIONS = optionNames<HerdcacheMetricsOptions>({
  cache: true,
  registry: true,
  stores: true,
  maxSources: true,
  maxNodes: true,
  client: true,
});

/**
 * Registers collectors for `cache` (and `stores`) on `registry`. Async because prom-client is
 * loaded on demand. One cache per registry: a second call with the same cache returns the same
 * collectors; with another cache it throws (the metrics would collide: use one registry per cache).
 */
export async function herdcacheMetrics(options: HerdcacheMetricsOptions): Promise<HerdcacheCollectors> {
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, 'an object with a "cache" and a "registry"');
  checkKnownKeys('herdcacheMetrics()', options, HERDCACHE_METRICS_OPTIONS);
  const { cache, registry, stores = [], maxSources = DEFAULT_MAX_SOURCES, maxNodes = DEFAULT_MAX_NODES } = options;
  if (cache === null || typeof cache !== 'object' || typeof cache.metrics !== 'function')
    throw invalidOption('cache', cache, 'a cache created with createCache()');
  checkRegistry(registry);
  checkPositiveInteger('maxSources', maxSources);
  checkPositiveInteger('maxNodes', maxNodes);
  if (!Array.isArray(stores)) throw invalidOption('stores', stores, 'an array of stores');
  const names = new Set<string>();
  for (const store of stores) {
    if (store === null || typeof store !== 'object' || typeof store.name !== 'string')
      throw invalidOption('stores', store, 'stores (memoryStore(), redisStore(...), tieredStore(...))');
    if (names.has(store.name))
      throw invalidOption('stores', store.name, 'stores with distinct names (the `store` label)');
    names.add(store.name);
  }
  const existing = perRegistry.get(registry);
  if (existing !== undefined) {
    if (existing.cache === cache) return existing.collectors;
    throw new HerdcacheError(
      'E_INVALID_OPTION',
      'herdcache: option "registry" already has herdcacheMetrics() of another cache: use one registry per cache',
    );
  }
  const client = options.client === undefined ? await loadPromClient() : checkPromClient(options.client);
  const raced = perRegistry.get(registry); // another call finished while prom-client loaded
  if (raced !== undefined && raced.cache === cache) return raced.collectors;
  const collectors = register(client, registry, cache, stores, { maxSources, maxNodes });
  perRegistry.set(registry, { cache, collectors });
  return collectors;
}

function register(
  client: PromClient,
  registry: Registry,
  cache: Cache,
  stores: readonly Store[],
  limits: { maxSources: number; maxNodes: number },
): HerdcacheCollectors {
  const names: string[] = [];
  const registers = [registry];
  const sourceLabel = boundedLabel(limits.maxSources);

  for (const counter of COUNTER_NAMES) {
    const [name, help] = CACHE_COUNTER_METRICS[counter];
    names.push(name);
    new client.Counter({
      name,
      help,
      labelNames: ['source'],
      registers,
      collect(this: Counter<'source'>) {
        this.reset();
        for (const [source, value] of bySource(cache.metrics().sources, counter, sourceLabel))
          this.inc({ source }, value);
      },
    });
  }

  names.push(IN_FLIGHT_METRIC);
  new client.Gauge({
    name: IN_FLIGHT_METRIC,
    help: 'Fills in flight in this process (one per key being computed).',
    registers,
    collect(this: Gauge) {
      this.set(cache.inFlight);
    },
  });

  const breakers = stores.filter(
    (store): store is BreakerStore => typeof (store as Partial<BreakerStore>).breakerState === 'string',
  );
  if (breakers.length > 0) {
    names.push(BREAKER_METRIC);
    new client.Gauge({
      name: BREAKER_METRIC,
      help: "1 for the store's current circuit breaker state (closed, open, half-open), 0 for the others.",
      labelNames: ['store', 'state'],
      registers,
      collect(this: Gauge<'store' | 'state'>) {
        this.reset();
        for (const store of breakers) {
          const current = store.breakerState;
          if (current === 'disabled') continue;
          for (const state of BREAKER_STATES) this.set({ store: store.name, state }, state === current ? 1 : 0);
        }
      },
    });
  }

  const tiered = stores.filter(
    (store): store is StatsStore => typeof (store as Partial<StatsStore>).stats === 'function',
  );
  if (tiered.length > 0) {
    const read = (store: StatsStore) => store.stats() as Readonly<Record<string, unknown>>;
    registerPerStore(client, registers, names, tiered, TIERED_GAUGES, 'gauge', read);
    registerPerStore(client, registers, names, tiered, TIERED_COUNTERS, 'counter', read);
  }

  registerNodeHealth(client, registers, names, stores, limits.maxNodes);
  registerWaitStats(client, registers, names, stores);

  let closed = false;
  return {
    names,
    close() {
      if (closed) return;
      closed = true;
      for (const name of names) registry.removeSingleMetric(name);
      perRegistry.delete(registry);
    },
  };
}

/**
 * Per Cluster master of each store: its breaker's state (1 for the current one; under "other",
 * how many of the nodes summed there are in each state) and its failed calls. A standalone
 * store's nodeHealth() is empty: no samples.
 */
function registerNodeHealth(
  client: PromClient,
  registers: Registry[],
  names: string[],
  stores: readonly Store[],
  maxNodes: number,
): void {
  const clustered = stores.filter(
    (store): store is NodeHealthStore => typeof (store as Partial<NodeHealthStore>).nodeHealth === 'function',
  );
  if (clustered.length === 0) return;
  // One bounded label per store, shared by both metrics so a node is "other" in both or neither.
  const nodeLabels = new Map(clustered.map((store) => [store, boundedLabel(maxNodes)]));
  const byNode = (store: NodeHealthStore) => {
    const label = nodeLabels.get(store)!;
    const out = new Map<string, { failures: number; states: Map<string, number> }>();
    for (const [address, health] of Object.entries(store.nodeHealth())) {
      const node = label(address);
      let sum = out.get(node);
      if (sum === undefined) out.set(node, (sum = { failures: 0, states: new Map() }));
      sum.failures += health.failures;
      sum.states.set(health.breaker, (sum.states.get(health.breaker) ?? 0) + 1);
    }
    return out;
  };
  names.push(NODE_BREAKER_METRIC, NODE_FAILURES_METRIC);
  new client.Gauge({
    name: NODE_BREAKER_METRIC,
    help: 'Per Redis Cluster master, 1 for its own circuit breaker\'s current state (closed, open, half-open), 0 for the others; node "other": how many of the masters past maxNodes are in each state.',
    labelNames: ['store', 'node', 'state'],
    registers,
    collect(this: Gauge<'store' | 'node' | 'state'>) {
      this.reset();
      for (const store of clustered) {
        for (const [node, { states }] of byNode(store))
          for (const state of BREAKER_STATES) this.set({ store: store.name, node, state }, states.get(state) ?? 0);
      }
    },
  });
  new client.Counter({
    name: NODE_FAILURES_METRIC,
    help: 'Per Redis Cluster master, calls to it that failed (timed out, refused by its breaker, errored).',
    labelNames: ['store', 'node'],
    registers,
    collect(this: Counter<'store' | 'node'>) {
      this.reset();
      for (const store of clustered)
        for (const [node, { failures }] of byNode(store)) this.inc({ store: store.name, node }, failures);
    },
  });
}

/** Waits on other replicas' fill locks, for the Redis stores given a subscriber (the others only poll). */
function registerWaitStats(client: PromClient, registers: Registry[], names: string[], stores: readonly Store[]): void {
  const listening = stores.filter(
    (store): store is WaitStatsStore =>
      typeof (store as Partial<WaitStatsStore>).waitStats === 'function' &&
      (store as WaitStatsStore).waitStats().enabled,
  );
  if (listening.length === 0) return;
  names.push(LOCK_WAITS_METRIC);
  new client.Counter({
    name: LOCK_WAITS_METRIC,
    help: "Poll steps of loads waiting on another replica's fill lock, by how they ended: woken (the fill was announced) or polled (the backoff ran out).",
    labelNames: ['store', 'outcome'],
    registers,
    collect(this: Counter<'store' | 'outcome'>) {
      this.reset();
      for (const store of listening) {
        const stats = store.waitStats();
        for (const outcome of WAIT_OUTCOMES) this.inc({ store: store.name, outcome }, Number(stats[outcome] ?? 0));
      }
    },
  });
  const read = (store: WaitStatsStore) => store.waitStats() as unknown as Readonly<Record<string, unknown>>;
  registerPerStore(client, registers, names, listening, WAIT_GAUGES, 'gauge', read);
  registerPerStore(client, registers, names, listening, WAIT_COUNTERS, 'counter', read);
}

/**
 * One gauge or counter per entry of `table` ({ stat: [metric name, help] }), labelled by store and
 * read from each store's snapshot at scrape time. Counters are reset before they are refilled:
 * the snapshot already holds the running total.
 */
function registerPerStore<S extends Store>(
  client: PromClient,
  registers: Registry[],
  names: string[],
  stores: readonly S[],
  table: Readonly<Record<string, readonly [string, string]>>,
  kind: 'gauge' | 'counter',
  read: (store: S) => Readonly<Record<string, unknown>>,
): void {
  for (const [stat, [name, help]] of Object.entries(table)) {
    names.push(name);
    const value = (store: S) => Number(read(store)[stat] ?? 0);
    if (kind === 'gauge') {
      new client.Gauge({
        name,
        help,
        labelNames: ['store'],
        registers,
        collect(this: Gauge<'store'>) {
          for (const store of stores) this.set({ store: store.name }, value(store));
        },
      });
    } else {
      new client.Counter({
        name,
        help,
        labelNames: ['store'],
        registers,
        collect(this: Counter<'store'>) {
          this.reset();
          for (const store of stores) this.inc({ store: store.name }, value(store));
        },
      });
    }
  }
}

/** Keeps the first `max` distinct values seen (stable across scrapes); the rest become "other". */
function boundedLabel(max: number): (value: string) => string {
  const kept = new Set<string>();
  return (value) => {
    if (kept.has(value)) return value;
    if (kept.size >= max) return 'other';
    kept.add(value);
    return value;
  };
}

/** One counter's non-zero values by (bounded) source label. */
function bySource(
  sources: Readonly<Record<string, Counters>>,
  counter: CounterName,
  label: (source: string) => string,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const [source, counters] of Object.entries(sources)) {
    const value = counters[counter];
    if (value === 0) continue;
    const name = label(source);
    out.set(name, (out.get(name) ?? 0) + value);
  }
  return out;
}

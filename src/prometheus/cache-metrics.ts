/**
 * herdcacheMetrics(): the cache's own counters and the stores' health (store-metrics.ts) in
 * Prometheus, for every user (getOrCompute, loaders outside GraphQL, any server), not only per
 * GraphQL operation.
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
import { boundedLabel, registerStoreHealth } from './store-metrics';

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
export const PENDING_INVALIDATIONS_METRIC = 'herdcache_invalidations_pending';
export const DEFAULT_MAX_SOURCES = 100;
export const DEFAULT_MAX_NODES = 64;

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
  // All or nothing: a name already taken on the registry fails the call, and what it registered
  // before that is removed again (a retry, or another cache's metrics, would meet leftovers).
  const before = new Set(registry.getMetricsAsArray().map((metric) => metric.name));
  const registered: string[] = [];
  let collectors: HerdcacheCollectors;
  try {
    collectors = register(client, registry, cache, stores, { maxSources, maxNodes }, registered);
  } catch (error) {
    for (const name of registered) if (!before.has(name)) registry.removeSingleMetric(name);
    const taken = registered.find((name) => before.has(name));
    if (taken === undefined) throw error;
    throw new HerdcacheError(
      'E_INVALID_OPTION',
      `herdcache: option "registry" already has a metric "${taken}": give herdcacheMetrics a registry of its own, or remove that metric (nothing was registered)`,
      { cause: error },
    );
  }
  perRegistry.set(registry, { cache, collectors });
  return collectors;
}

function register(
  client: PromClient,
  registry: Registry,
  cache: Cache,
  stores: readonly Store[],
  limits: { maxSources: number; maxNodes: number },
  names: string[],
): HerdcacheCollectors {
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

  names.push(PENDING_INVALIDATIONS_METRIC);
  new client.Gauge({
    name: PENDING_INVALIDATIONS_METRIC,
    help: 'Invalidations the store failed to take, waiting to be sent again (kind: key, tag, clear).',
    labelNames: ['kind'],
    registers,
    collect(this: Gauge<'kind'>) {
      const pending = cache.pendingInvalidations;
      this.set({ kind: 'key' }, pending.keys);
      this.set({ kind: 'tag' }, pending.tags);
      this.set({ kind: 'clear' }, pending.clear ? 1 : 0);
    },
  });

  registerStoreHealth(client, registers, names, stores, limits.maxNodes);

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

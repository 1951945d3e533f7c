/**
 * Prometheus metrics through prom-client, registered on the user's Registry only.
 *
 * prom-client is an optional peer: it is loaded with a dynamic import() when metrics are created
 * (or passed in as `client`), so `import 'herdcache'` works without it.
 *
 * Label cardinality is bounded: `source` comes from the schema and the code (field coordinates,
 * loader names, getOrCompute labels); `operation` comes from clients, so the first
 * `maxOperationLabels` distinct names are kept and the rest are counted as "other"
 * (anonymous operations as "anonymous"). A client also chooses how long its name is and may spell
 * a bucket's name: see operationLabelOf.
 */
import { createHash } from 'node:crypto';
import type { Counter, Histogram, Registry } from 'prom-client';
import type { Cache } from '../core/cache';
import { HerdcacheError, invalidOption } from '../core/errors';
import type { CacheReport, CacheReportCounters } from '../graphql/request';
import type { MetricsRegistry } from '../graphql/reporting';
import { checkKnownKeys, checkPositiveInteger, optionNames } from '../core/options';

export type PromClient = typeof import('prom-client');

export interface PrometheusMetricsOptions {
  /** Where the metrics are registered. Nothing goes to prom-client's global registry. */
  registry: Registry;
  /** Distinct operation label values kept; later ones count as "other". Default 100. */
  maxOperationLabels?: number;
  /** The prom-client module. Default: `import('prom-client')`. */
  client?: PromClient;
}

export const DEFAULT_MAX_OPERATION_LABELS = 100;

/** The buckets' label values: a client's operation name never becomes one (see operationLabelOf). */
export const OTHER_OPERATIONS = 'other';
export const ANONYMOUS_OPERATION = 'anonymous';

/** Longest operation name used as its label as it is; longer ones are cut and hashed. */
export const MAX_OPERATION_LABEL_LENGTH = 64;

/** A GraphQL name (the spec's Name), at most MAX_OPERATION_LABEL_LENGTH characters. */
const PLAIN_NAME = new RegExp(`^[_A-Za-z][_0-9A-Za-z]{0,${MAX_OPERATION_LABEL_LENGTH - 1}}$`);

/**
 * The label of a client-supplied operation name, before the cap on distinct values: the name itself
 * when it is a GraphQL name of at most 64 characters other than a bucket's ("other", "anonymous");
 * otherwise its first 64 characters (any character outside a GraphQL name as '_'), '~' and the first
 * 8 hex digits of its sha1. The label is then at most 73 printable characters whatever the client
 * sent (a 100 KiB name would otherwise be written out on every scrape), and no client reaches a
 * bucket or another name's label by spelling it: '~' never occurs in a name kept as it is.
 */
export function operationLabelOf(name: string | null | undefined): string {
  if (name === null || name === undefined || name === '') return ANONYMOUS_OPERATION;
  if (
    name.length <= MAX_OPERATION_LABEL_LENGTH &&
    name !== OTHER_OPERATIONS &&
    name !== ANONYMOUS_OPERATION &&
    PLAIN_NAME.test(name)
  )
    return name;
  const head = name.slice(0, MAX_OPERATION_LABEL_LENGTH).replace(/[^_0-9A-Za-z]/g, '_');
  return `${head}~${createHash('sha1').update(name, 'utf8').digest('hex').slice(0, 8)}`;
}

/** Seconds: from a memory-speed fill to a slow backend call. */
const FILL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Counter name per reported counter; all labelled {operation, source}. */
export const COUNTER_METRICS = {
  hits: ['herdcache_hits_total', 'Loads answered with a fresh cached value.'],
  misses: ['herdcache_misses_total', 'Loads that found nothing usable and started a fill.'],
  coalesced: ['herdcache_coalesced_total', 'Loads that joined a fill already in flight in this process.'],
  staleServed: ['herdcache_stale_served_total', 'Loads answered with a stale value while one refresh ran.'],
  fills: ['herdcache_fills_total', 'Keys computed by a resolver, fill or batch function.'],
  fillFailures: ['herdcache_fill_failures_total', 'Keys whose fill failed (nothing cached).'],
  lockContended: ['herdcache_lock_contended_total', 'Fill lock attempts that found another process filling.'],
  bypassed: [
    'herdcache_bypassed_total',
    '@cached field calls resolved without the cache (no parent identity, no session, unkeyable arguments).',
  ],
} as const satisfies Record<keyof CacheReportCounters, readonly [string, string]>;

export const RESPONSES_METRIC = 'herdcache_responses_total';
export const FILL_DURATION_METRIC = 'herdcache_fill_duration_seconds';

type CounterKey = keyof typeof COUNTER_METRICS;
const COUNTER_KEYS = Object.keys(COUNTER_METRICS) as CounterKey[];

export class HerdcacheMetrics {
  readonly #counters: Record<CounterKey, Counter<'operation' | 'source'>>;
  readonly #fillDuration: Histogram<'source'>;
  readonly #responses: Counter<'operation' | 'outcome'>;
  readonly #maxOperations: number;
  readonly #operations = new Set<string>();
  /** Caches observed, with how many users asked for it (two plugins on one cache observe once). */
  readonly #observed = new Map<Cache, { users: number; stop: () => void }>();

  /** @internal use prometheusMetrics() */
  constructor(client: PromClient, registry: Registry, maxOperations: number) {
    this.#maxOperations = maxOperations;
    const counters = {} as Record<CounterKey, Counter<'operation' | 'source'>>;
    for (const key of COUNTER_KEYS) {
      const [name, help] = COUNTER_METRICS[key];
      counters[key] =
        reuse(registry, name, 'inc', ['operation', 'source']) ??
        new client.Counter({ name, help, labelNames: ['operation', 'source'], registers: [registry] });
    }
    this.#counters = counters;
    this.#responses =
      reuse(registry, RESPONSES_METRIC, 'inc', ['operation', 'outcome']) ??
      new client.Counter({
        name: RESPONSES_METRIC,
        help: 'Operations by how the response cache answered them (hit, miss, coalesced, stale, bypassed, oversized).',
        labelNames: ['operation', 'outcome'],
        registers: [registry],
      });
    this.#fillDuration =
      reuse(registry, FILL_DURATION_METRIC, 'observe', ['source']) ??
      new client.Histogram({
        name: FILL_DURATION_METRIC,
        help: 'Duration of fills (resolver, fill or batch function), once per key filled; a batch counts its duration for each of its keys.',
        labelNames: ['source'],
        buckets: FILL_BUCKETS,
        registers: [registry],
      });
  }

  /**
   * The `operation` label for a client-supplied operation name: operationLabelOf's, while fewer than
   * maxOperationLabels distinct labels were given out, else "other". Only labels are remembered
   * (at most 73 characters each), never the names clients sent.
   */
  operationLabel(name: string | null | undefined): string {
    const label = operationLabelOf(name);
    if (label === ANONYMOUS_OPERATION) return label;
    const operations = this.#operations;
    if (operations.has(label)) return label;
    if (operations.size >= this.#maxOperations) return OTHER_OPERATIONS;
    operations.add(label);
    return label;
  }

  /** Adds one operation's report (the plugin calls this once per operation, when the response is sent). */
  recordOperation(operationName: string | null | undefined, report: CacheReport): void {
    const sources = Object.entries(report.sources);
    if (sources.length === 0) return;
    const operation = this.operationLabel(operationName);
    for (const [source, row] of sources) {
      for (const key of COUNTER_KEYS) {
        const n = row[key];
        if (n > 0) this.#counters[key].inc({ operation, source }, n);
      }
    }
  }

  /** Counts one operation's response-cache outcome (responseCache on). */
  recordResponse(operationName: string | null | undefined, outcome: string): void {
    this.#responses.inc({ operation: this.operationLabel(operationName), outcome });
  }

  /** Records one fill's duration (what the cache's onFill hook reports). */
  observeFill(source: string, durationMs: number): void {
    this.#fillDuration.observe({ source }, durationMs / 1000);
  }

  /**
   * Feeds this cache's fill durations (every fill, background refreshes included) into the
   * histogram, through cache.observe(). Returns a function that stops it; observing one cache
   * twice records each fill once.
   */
  observe(cache: Cache): () => void {
    let entry = this.#observed.get(cache);
    if (entry === undefined) {
      const stop = cache.observe({ onFill: (_key, source, durationMs) => this.observeFill(source, durationMs) });
      entry = { users: 0, stop };
      this.#observed.set(cache, entry);
    }
    entry.users++;
    const current = entry;
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      if (--current.users === 0) {
        current.stop();
        this.#observed.delete(cache);
      }
    };
  }
}

/** One HerdcacheMetrics per registry: two servers sharing a registry share the metrics and the label cap. */
const perRegistry = new WeakMap<Registry, HerdcacheMetrics>();

/**
 * herdcache's metrics on `registry` (created on first call for that registry, then reused).
 * Async because prom-client is loaded on demand.
 */
const PROMETHEUS_METRICS_OPTIONS = optionNames<PrometheusMetricsOptions>({
  registry: true,
  maxOperationLabels: true,
  client: true,
});

export async function prometheusMetrics(options: PrometheusMetricsOptions): Promise<HerdcacheMetrics> {
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, 'an object with a "registry"');
  checkKnownKeys('prometheusMetrics()', options, PROMETHEUS_METRICS_OPTIONS);
  const { registry, maxOperationLabels = DEFAULT_MAX_OPERATION_LABELS } = options;
  checkRegistry(registry);
  const max = checkPositiveInteger('maxOperationLabels', maxOperationLabels);
  const existing = perRegistry.get(registry);
  if (existing !== undefined) return existing;
  const client = options.client === undefined ? await loadPromClient() : checkPromClient(options.client);
  const created = perRegistry.get(registry) ?? new HerdcacheMetrics(client, registry, max);
  perRegistry.set(registry, created);
  return created;
}

/**
 * For the server plugins: validates `registry` and `maxOperationLabels` now (at plugin creation)
 * and returns the function that loads the metrics later, or undefined when no registry is given.
 */
export function operationRecorder(options: {
  registry?: MetricsRegistry;
  maxOperationLabels?: number;
}): (() => Promise<HerdcacheMetrics>) | undefined {
  const { registry, maxOperationLabels = DEFAULT_MAX_OPERATION_LABELS } = options;
  checkPositiveInteger('maxOperationLabels', maxOperationLabels);
  if (registry === undefined) return undefined;
  checkRegistry(registry);
  return () => prometheusMetrics({ registry, maxOperationLabels });
}

/** A `client` option, when given (null too: only undefined means the default), must look like prom-client. */
export function checkPromClient(client: unknown): PromClient {
  if (client === null || typeof client !== 'object' || typeof (client as Partial<PromClient>).Counter !== 'function') {
    throw invalidOption('client', client, "the prom-client module (import * as client from 'prom-client')");
  }
  return client as PromClient;
}

export function checkRegistry(registry: unknown): asserts registry is Registry {
  const candidate = registry as Partial<Registry> | null;
  if (
    candidate === null ||
    typeof candidate !== 'object' ||
    typeof candidate.getSingleMetric !== 'function' ||
    typeof candidate.registerMetric !== 'function'
  ) {
    throw invalidOption('registry', registry, 'a prom-client Registry');
  }
}

export async function loadPromClient(): Promise<PromClient> {
  try {
    const loaded = (await import('prom-client')) as PromClient & { default?: PromClient };
    return typeof loaded.Counter === 'function' ? loaded : loaded.default!;
  } catch (error) {
    throw new HerdcacheError(
      'E_INVALID_OPTION',
      'herdcache: option "registry" needs prom-client: install it (an optional peer dependency)',
      { cause: error },
    );
  }
}

/**
 * The registry's metric of that name, when it is one of ours (another plugin on the registry made
 * it: a counter or histogram with our labels); undefined when there is none. Another metric of that
 * name is refused now, at the server's start: adopted, it threw at the first request it counted.
 */
function reuse<M>(
  registry: Registry,
  name: string,
  method: 'inc' | 'observe',
  labels: readonly string[],
): M | undefined {
  const found = registry.getSingleMetric(name) as unknown as
    { inc?: unknown; observe?: unknown; labelNames?: readonly string[] } | undefined;
  if (found === undefined) return undefined;
  const given = [...(found.labelNames ?? [])].sort().join(',');
  if (typeof found[method] !== 'function' || given !== [...labels].sort().join(',')) {
    throw new HerdcacheError(
      'E_INVALID_OPTION',
      `herdcache: option "registry" already has a metric "${name}" that is not herdcache's (labels: ${given || 'none'}; herdcache's: ${labels.join(', ')}): give herdcache a registry of its own, or remove that metric`,
    );
  }
  return found as M;
}

/**
 * The stores' health for herdcacheMetrics(), read from each store's own snapshot at scrape time:
 * a redisStore's circuit breaker (breakerState) and per Cluster master (nodeHealth()), its waits
 * on other replicas' fill locks (waitStats()), a tieredStore's L1 and pub/sub (stats()). A store
 * is asked only for what it has; `store` labels are the names of the stores given, `node` labels
 * bounded by maxNodes per store.
 */
import type { Counter, Gauge, Registry } from 'prom-client';
import type { Store } from '../core/store';
import type { PromClient } from './metrics';

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

/** Registers the health metrics of the stores that have any; `names` gets each metric's name. */
export function registerStoreHealth(
  client: PromClient,
  registers: Registry[],
  names: string[],
  stores: readonly Store[],
  maxNodes: number,
): void {
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

  registerNodeHealth(client, registers, names, stores, maxNodes);
  registerWaitStats(client, registers, names, stores);
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
export function boundedLabel(max: number): (value: string) => string {
  const kept = new Set<string>();
  return (value) => {
    if (kept.has(value)) return value;
    if (kept.size >= max) return 'other';
    kept.add(value);
    return value;
  };
}

/** herdcache/prometheus: prom-client collectors on the user's Registry. */
export {
  herdcacheMetrics,
  CACHE_COUNTER_METRICS,
  IN_FLIGHT_METRIC,
  PENDING_INVALIDATIONS_METRIC,
  DEFAULT_MAX_SOURCES,
  DEFAULT_MAX_NODES,
  type HerdcacheCollectors,
  type HerdcacheMetricsOptions,
} from './cache-metrics';
export { BREAKER_METRIC, NODE_BREAKER_METRIC, NODE_FAILURES_METRIC, LOCK_WAITS_METRIC } from './store-metrics';
export {
  prometheusMetrics,
  HerdcacheMetrics,
  COUNTER_METRICS,
  FILL_DURATION_METRIC,
  DEFAULT_MAX_OPERATION_LABELS,
  type PrometheusMetricsOptions,
} from './metrics';

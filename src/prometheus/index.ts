/** herdcache/prometheus: prom-client collectors on the user's Registry. */
export {
  prometheusMetrics,
  HerdcacheMetrics,
  COUNTER_METRICS,
  FILL_DURATION_METRIC,
  DEFAULT_MAX_OPERATION_LABELS,
  type PrometheusMetricsOptions,
} from './metrics';

/** herdcache/otel: OpenTelemetry spans for fills and store calls (through @opentelemetry/api). */
export { tracingHooks, FILL_SPAN, STORE_SPAN_PREFIX, TRACER_NAME, type TracingOptions } from './tracing';
export { tracedStore } from './store';

/** herdcache/envelop: the Envelop plugin for GraphQL Yoga and Envelop-based servers (per-operation report, Prometheus metrics). */
export { useHerdcache, type UseHerdcacheOptions } from './plugin';

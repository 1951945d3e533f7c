/** herdcache/apollo: the Apollo Server plugin (per-operation report, Prometheus metrics). */
export { herdcachePlugin, type HerdcachePluginOptions } from './plugin';

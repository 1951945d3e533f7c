/**
 * The Apollo Server plugin (@apollo/server 5, and 4: the plugin API it uses is the same).
 *
 * Per operation it makes sure the context carries the operation's cache state (the request scope
 * the @cached directive and the helpers use), and when the response leaves it reports what the
 * operation's loads did: into `response.extensions.cache` (when enabled) and into Prometheus
 * counters labelled {operation, source} (when a registry is given).
 *
 * Only types come from @apollo/server: it is an optional peer and this module loads without it.
 */
import type { ApolloServerPlugin, BaseContext, GraphQLRequestListener } from '@apollo/server';
import type { Registry } from 'prom-client';
import type { Cache } from '../core/cache';
import { HerdcacheError, invalidOption } from '../core/errors';
import { attachOperation, checkCache, detachOperation } from '../graphql/request';
import { type HerdcacheMetrics, DEFAULT_MAX_OPERATION_LABELS, prometheusMetrics } from '../prometheus/metrics';
import { checkBoolean, checkPositiveInteger } from '../core/options';

export interface HerdcachePluginOptions {
  /** The registry the schema's @cached fields and the context's loaders use. */
  cache: Cache;
  /**
   * Adds `extensions.cache` ({ total, sources }) to every response. It shows clients how the
   * cache behaved, so the default is on outside production: `process.env.NODE_ENV !== 'production'`,
   * read when the plugin is created.
   */
  extensions?: boolean;
  /** prom-client Registry to register herdcache's metrics on (needs prom-client installed). Default: no metrics. */
  registry?: Registry;
  /** Distinct `operation` label values before the rest count as "other". Default 100. */
  maxOperationLabels?: number;
}

export function herdcachePlugin<TContext extends BaseContext = BaseContext>(options: HerdcachePluginOptions): ApolloServerPlugin<TContext> {
  if (options === null || typeof options !== 'object') throw invalidOption('options', options, 'an object with a "cache"');
  const { cache, registry, maxOperationLabels = DEFAULT_MAX_OPERATION_LABELS } = options;
  checkCache(cache);
  const extensions = options.extensions === undefined ? process.env.NODE_ENV !== 'production' : checkBoolean('extensions', options.extensions);
  checkPositiveInteger('maxOperationLabels', maxOperationLabels);
  if (registry !== undefined && (registry === null || typeof registry !== 'object' || typeof registry.getSingleMetric !== 'function')) {
    throw invalidOption('registry', registry, 'a prom-client Registry');
  }
  let metrics: HerdcacheMetrics | undefined;

  return {
    async serverWillStart() {
      if (registry === undefined) return;
      metrics = await prometheusMetrics({ registry, maxOperationLabels });
      const stop = metrics.observe(cache);
      return {
        async serverWillStop() {
          stop();
        },
      };
    },

    async requestDidStart({ contextValue }): Promise<GraphQLRequestListener<TContext> | void> {
      const attached = attachOperation(contextValue, cache);
      if (attached === undefined) return; // a context that cannot carry state (frozen, not an object)
      const { operation, created } = attached;
      if (operation.cache !== cache) {
        throw new HerdcacheError('E_INVALID_OPTION', 'herdcache: the context was made by herdcacheContext() with another cache than herdcachePlugin({ cache })');
      }
      return {
        async willSendResponse({ response, operation: document, operationName }) {
          // A context object reused for the next operation must not keep this one's memo.
          detachOperation(contextValue, operation, created);
          if (document === undefined) return; // not parsed or not valid: nothing ran
          const report = operation.report();
          metrics?.recordOperation(operationName, report);
          if (extensions && response.body.kind === 'single') {
            const result = response.body.singleResult;
            result.extensions = { ...result.extensions, cache: report };
          }
        },
      };
    },
  };
}

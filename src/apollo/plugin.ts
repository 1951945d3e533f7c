/**
 * The Apollo Server plugin (@apollo/server 5, and 4: the plugin API it uses is the same).
 *
 * Per operation it makes sure the context carries the operation's cache state (the request scope
 * the @cached directive and the helpers use), and when the response leaves it reports what the
 * operation's loads did: into `response.extensions.cache` (when enabled) and into Prometheus
 * counters labelled {operation, source} (when a registry is given). The report itself is shared
 * with the Envelop/Yoga plugin (herdcache/envelop): see graphql/reporting.
 *
 * Only types come from @apollo/server: it is an optional peer and this module loads without it.
 */
import type { ApolloServerPlugin, BaseContext, GraphQLRequestListener } from '@apollo/server';
import type { Registry } from 'prom-client';
import type { Cache } from '../core/cache';
import { OperationReporting, checkPluginOptions } from '../graphql/reporting';
import { optionNames } from '../core/options';
import { operationRecorder } from '../prometheus/metrics';

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

const PLUGIN_OPTIONS = optionNames<HerdcachePluginOptions>({ cache: true, extensions: true, registry: true, maxOperationLabels: true });

export function herdcachePlugin<TContext extends BaseContext = BaseContext>(options: HerdcachePluginOptions): ApolloServerPlugin<TContext> {
  checkPluginOptions(options, 'herdcachePlugin', PLUGIN_OPTIONS);
  const recorder = operationRecorder(options);
  const reporting = new OperationReporting({ cache: options.cache, extensions: options.extensions, recorder, owner: 'herdcachePlugin' });

  return {
    async serverWillStart() {
      if (recorder === undefined) return;
      const stop = await reporting.start();
      return {
        async serverWillStop() {
          stop();
        },
      };
    },

    async requestDidStart({ contextValue }): Promise<GraphQLRequestListener<TContext> | void> {
      const active = reporting.begin(contextValue);
      if (active === undefined) return; // a context that cannot carry state (frozen, not an object)
      return {
        async willSendResponse({ response, operation: document, operationName }) {
          // `document` is undefined when the request did not parse or validate: nothing ran.
          const report = reporting.end(active, operationName, document !== undefined);
          if (report !== undefined && response.body.kind === 'single') {
            const result = response.body.singleResult;
            result.extensions = { ...result.extensions, cache: report };
          }
        },
      };
    },
  };
}

/**
 * useHerdcache(): the Envelop plugin, for GraphQL Yoga 5 and every Envelop-based server.
 *
 * The same per-operation report as the Apollo plugin (one implementation: graphql/reporting):
 * the context gets the operation's cache state when execution starts (unless herdcacheContext()
 * already put it there), and when the result is ready its report goes to `extensions.cache`
 * (when enabled) and to the Prometheus counters labelled {operation, source} (when a registry is
 * given). An incremental result (@defer/@stream) is recorded when its stream ends, without the
 * extension: no single payload carries the whole operation.
 *
 * Only types come from @envelop/core: it is an optional peer and this module loads without it.
 */
import type { Plugin } from '@envelop/core';
import type { DocumentNode, ExecutionResult } from 'graphql';
import type { Registry } from 'prom-client';
import type { Cache } from '../core/cache';
import { OperationReporting, checkPluginOptions } from '../graphql/reporting';
import { optionNames } from '../core/options';
import { operationRecorder } from '../prometheus/metrics';

export interface UseHerdcacheOptions {
  /** The registry the schema's @cached fields and the context's loaders use. */
  cache: Cache;
  /** Adds `extensions.cache` ({ total, sources }) to every result. Default: on outside production (`NODE_ENV`, read at creation). */
  extensions?: boolean;
  /** prom-client Registry to register herdcache's metrics on (needs prom-client installed). Default: no metrics. */
  registry?: Registry;
  /** Distinct `operation` label values before the rest count as "other". Default 100. */
  maxOperationLabels?: number;
}

const PLUGIN_OPTIONS = optionNames<UseHerdcacheOptions>({ cache: true, extensions: true, registry: true, maxOperationLabels: true });

export function useHerdcache<TContext extends Record<string, any> = {}>(options: UseHerdcacheOptions): Plugin<TContext> {
  checkPluginOptions(options, 'useHerdcache', PLUGIN_OPTIONS);
  const recorder = operationRecorder(options);
  const reporting = new OperationReporting({ cache: options.cache, extensions: options.extensions, recorder, owner: 'useHerdcache' });
  // Envelop has no server start hook: prom-client is loaded now, and the operations that end
  // before it is there are recorded once it is (see OperationReporting.end).
  if (recorder !== undefined) {
    reporting.start().catch((error: unknown) => {
      console.error('herdcache: useHerdcache could not create its Prometheus metrics:', error);
    });
  }

  return {
    onExecute({ args }) {
      const active = reporting.begin(args.contextValue);
      if (active === undefined) return; // a context that cannot carry state (frozen, not an object)
      const operationName = operationNameOf(args.document, args.operationName);
      return {
        onExecuteDone({ result, setResult }) {
          if (isAsyncIterable(result)) {
            return { onEnd: () => void reporting.end(active, operationName, true) };
          }
          const report = reporting.end(active, operationName, true);
          const single = result as ExecutionResult;
          if (report !== undefined) setResult({ ...single, extensions: { ...single.extensions, cache: report } });
          return undefined;
        },
      };
    },
  };
}

/** The executed operation's name, as Apollo reports it: the named operation, or the document's only one. */
function operationNameOf(document: DocumentNode, requested: string | null | undefined): string | undefined {
  if (requested) return requested;
  let name: string | undefined;
  let operations = 0;
  for (const definition of document.definitions) {
    if (definition.kind !== ('OperationDefinition' as typeof definition.kind)) continue;
    operations++;
    name = (definition as { name?: { value: string } }).name?.value;
  }
  return operations === 1 ? name : undefined;
}

function isAsyncIterable(result: unknown): boolean {
  return result !== null && typeof result === 'object' && typeof (result as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function';
}

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
import type { DocumentNode, ExecutionArgs, ExecutionResult } from 'graphql';
import type { Cache } from '../core/cache';
import { type MetricsRegistry, OperationReporting, checkPluginOptions } from '../graphql/reporting';
import { isThenable } from '../core/errors';
import { optionNames } from '../core/options';
import { operationRecorder } from '../prometheus/metrics';
import {
  type Lookup,
  type NotStoredReason,
  type ResponseBypassReason,
  type ResponseCacheOptions,
  type ResponseOutcome,
  type ResponseRequest,
  INCREMENTAL_RESULT,
  ResponseEngine,
} from '../graphql/response-cache';
import { responseCacheHintOf, restrictPolicy } from '../graphql/response-hint';
import { warnIfUnwrapped } from '../graphql/unwrapped';
import { OnceWarnings } from '../graphql/warnings';
import { CacheControlHeaders, type YogaResponsePayload } from './cache-control';
import { MergedPayloads } from './incremental';
import { Unfinished } from './unfinished';

export interface UseHerdcacheOptions<TContext = any> {
  /** The registry the schema's @cached fields and the context's loaders use. */
  cache: Cache;
  /** Adds `extensions.cache` ({ total, sources }) to every result. Default: on outside production (`NODE_ENV`, read at creation). */
  extensions?: boolean;
  /** prom-client Registry to register herdcache's metrics on (needs prom-client installed). Default: no metrics. */
  registry?: MetricsRegistry;
  /** Distinct `operation` label values before the rest count as "other". Default 100. */
  maxOperationLabels?: number;
  /** Caches whole responses too (off by default): `true` or options; a hit skips execution. See docs/response-cache.md. */
  responseCache?: boolean | ResponseCacheOptions<TContext>;
}

const PLUGIN_OPTIONS = optionNames<UseHerdcacheOptions>({
  cache: true,
  extensions: true,
  registry: true,
  maxOperationLabels: true,
  responseCache: true,
});

/** Yoga's onParams payload, the part used (only types come from graphql-yoga, an optional peer). */
type YogaParamsHandler = (payload: { context: unknown; [more: string]: unknown }) => unknown;
interface YogaParamsPayload {
  paramsHandler: YogaParamsHandler;
  setParamsHandler(handler: YogaParamsHandler): void;
}

// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- the default envelop's own plugins use (useMaskedErrors, useResponseCache)
export function useHerdcache<TContext extends Record<string, any> = {}>(
  options: UseHerdcacheOptions<TContext>,
): Plugin<TContext> & {
  onResponse?(payload: YogaResponsePayload): void;
  onRequestParse?(payload: { request: object }): {
    onRequestParseDone(payload: { requestParserResult: unknown }): void;
  };
  onParams?(payload: YogaParamsPayload): void;
} {
  checkPluginOptions(options, 'useHerdcache', PLUGIN_OPTIONS);
  const engine =
    options.responseCache === undefined || options.responseCache === false
      ? undefined
      : new ResponseEngine(options.cache, options.responseCache, 'useHerdcache()');
  // Yoga only (its onResponse hook): the response layer's Cache-Control header, as Apollo's.
  const headers = engine === undefined ? undefined : new CacheControlHeaders();
  // Yoga only (its onParams and onResponse hooks): executions never handed over are, as failed (see ./unfinished).
  const unfinished = engine === undefined ? undefined : new Unfinished();
  const recorder = operationRecorder(options);
  const reporting = new OperationReporting({
    cache: options.cache,
    extensions: options.extensions,
    recorder,
    owner: 'useHerdcache',
  });
  // Envelop has no server start hook: prom-client is loaded now, and the operations that end
  // before it is there are recorded once it is (see OperationReporting.end).
  if (recorder !== undefined) {
    reporting.start().catch((error: unknown) => {
      console.error('herdcache: useHerdcache could not create its Prometheus metrics:', error);
    });
  }

  const schemaWarnings = new OnceWarnings();
  return {
    // Each schema the server is given (Envelop calls it at start and on every change).
    onSchemaChange: ({ schema }) => warnIfUnwrapped(schema, schemaWarnings, 'useHerdcache'),
    ...(headers === undefined
      ? {}
      : {
          // The operation's handling (parse … execute, an error turned into a result) has ended: its
          // execution not handed over is, as failed (a batch's operations each; no plugin's hook
          // that throws can skip this, and one that replaces the handler bypasses the execution too).
          onParams: ({ paramsHandler, setParamsHandler }: YogaParamsPayload) => {
            setParamsHandler((payload) => {
              const ended = () => {
                if (payload.context !== null && typeof payload.context === 'object') unfinished!.end(payload.context);
                headers.ended(payload.context);
              };
              let handled: unknown;
              try {
                handled = paramsHandler(payload);
              } catch (error) {
                ended();
                throw error;
              }
              if (!isThenable(handled)) {
                ended();
                return handled;
              }
              return handled.then(
                (result) => (ended(), result),
                (error: unknown) => {
                  ended();
                  throw error;
                },
              );
            });
          },
          // A batch: how many operations its response holds (see CacheControlHeaders.expect).
          onRequestParse: ({ request }: { request: object }) => ({
            onRequestParseDone: ({ requestParserResult }: { requestParserResult: unknown }) => {
              if (Array.isArray(requestParserResult)) headers.expect(request, requestParserResult.length);
            },
          }),
          onResponse: (payload: YogaResponsePayload) => {
            unfinished!.end(payload.request);
            headers.write(payload);
          },
        }),
    async onExecute({ args, executeFn, setExecuteFn, setResultAndStopExecution }) {
      const active = reporting.begin(args.contextValue);
      const operationName = operationNameOf(args.document, args.operationName);
      let outcome: ResponseOutcome = 'bypassed';
      // Why, when the layer did not cache it: not looked up (bypassed), or executed and not stored.
      let reason: { bypassReason: ResponseBypassReason } | { notStoredReason: NotStoredReason } | undefined;
      let lookup: Lookup | undefined;
      let request: ResponseRequest | undefined;
      if (engine !== undefined) {
        request = {
          schema: args.schema,
          document: args.document,
          operationName: args.operationName,
          variables: args.variableValues,
          context: args.contextValue,
          signal: requestSignal(args),
        };
        const plan = engine.plan(request);
        if (typeof plan === 'string') reason = { bypassReason: plan };
        else {
          // Runs the operation apart from this request (a background refresh, a re-execution after
          // an invalidation), with the context the engine gives it and without the request's abort
          // signal (Yoga's useExecutionCancellation): the request may be over, the run is not its.
          const execute = async (context: object) => {
            const apart: ExecutionArgs & { signal?: AbortSignal } = { ...args, contextValue: context };
            apart.signal = undefined;
            return (await executeFn(apart)) as ExecutionResult;
          };
          const found = engine.lookup(plan, execute);
          lookup = found instanceof Promise ? await found : found;
          if (lookup.complete !== undefined)
            lookup = { ...lookup, complete: unfinished!.track(args.contextValue, lookup.complete) };
          outcome = lookup.outcome;
          if (lookup.outcome === 'bypassed') reason = { bypassReason: lookup.bypassReason };
          else if (lookup.outcome === 'miss' && lookup.notStoredReason !== undefined)
            reason = { notStoredReason: lookup.notStoredReason };
          const stored = lookup.response;
          if (stored !== undefined) {
            // Answered before execution, with the Cache-Control its stored policy allows and its age.
            headers?.note(args.contextValue, stored, lookup.age);
            reporting.recordResponse(operationName, outcome);
            const report = active === undefined ? undefined : reporting.end(active, operationName, true);
            const result: ExecutionResult = { data: stored.data as Record<string, unknown> };
            if (report !== undefined) result.extensions = { cache: { ...report, response: outcome, age: lookup.age } };
            setResultAndStopExecution(result);
            return;
          }
          const complete = lookup.complete;
          if (complete !== undefined) {
            // An execution that throws never reaches onExecuteDone: its waiters must still be released.
            setExecuteFn(async (executeArgs) => {
              try {
                return await executeFn(executeArgs);
              } catch (error) {
                await complete({ errors: [error] });
                throw error;
              }
            });
          }
        }
      }
      if (active === undefined && engine === undefined) return; // a context that cannot carry state (frozen, not an object)
      return {
        async onExecuteDone({ result, setResult }) {
          if (isAsyncIterable(result)) {
            // Incremental delivery is never stored: waiters on this key execute themselves.
            headers?.note(args.contextValue, undefined);
            if (lookup?.complete !== undefined) await lookup.complete(INCREMENTAL_RESULT);
            if (engine !== undefined) reporting.recordResponse(operationName, outcome);
            const onEnd = () => void (active !== undefined && reporting.end(active, operationName, true));
            if (engine === undefined || request === undefined || !isMutation(args.document, args.operationName))
              return { onEnd };
            // A mutation's entities are invalidated as its payloads leave (each before it is sent):
            // each payload's part as a tree the walk reads (./incremental).
            const merged = new MergedPayloads();
            const mutation = request;
            return {
              onNext: async ({ result: payload }) => {
                for (const tree of merged.add(payload)) await engine.afterMutation(mutation, tree);
              },
              onEnd,
            };
          }
          const single = result as ExecutionResult;
          // The final policy: the static one restricted by the resolvers' runtime hints (a result
          // stricter than its key's policy is neither stored nor shared: see response-hint).
          const hint = responseCacheHintOf(args.contextValue);
          if (headers !== undefined && request !== undefined) {
            const policy = engine!.policyOf(request);
            const final = policy === undefined || hint === undefined ? policy : restrictPolicy(policy, hint);
            headers.note(args.contextValue, single.errors?.length ? undefined : final);
          }
          try {
            const completion = lookup?.complete === undefined ? undefined : await lookup.complete(single, hint);
            if (completion === 'oversized')
              outcome = 'oversized'; // served, not stored: counted apart
            else if (completion !== undefined && completion !== 'stored') reason = { notStoredReason: completion };
          } finally {
            if (engine !== undefined && request !== undefined && isMutation(args.document, args.operationName))
              await engine.afterMutation(request, single.data);
          }
          if (engine !== undefined) reporting.recordResponse(operationName, outcome);
          const report = active === undefined ? undefined : reporting.end(active, operationName, true);
          if (report !== undefined) {
            const cache = engine === undefined ? report : { ...report, response: outcome, ...reason };
            setResult({ ...single, extensions: { ...single.extensions, cache } });
          }
          return undefined;
        },
      };
    },
  };
}

function isMutation(document: DocumentNode, operationName: string | null | undefined): boolean {
  for (const definition of document.definitions) {
    if (definition.kind !== ('OperationDefinition' as typeof definition.kind)) continue;
    const operation = definition as { operation: string; name?: { value: string } };
    if (!operationName || operation.name?.value === operationName) return operation.operation === 'mutation';
  }
  return false;
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
  return (
    result !== null &&
    typeof result === 'object' &&
    typeof (result as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function'
  );
}

/**
 * The request's abort signal: the execution's (Yoga's useExecutionCancellation sets it), else the
 * one of the Fetch request Yoga puts in the context (a plugin listed later sets it on the execution).
 */
function requestSignal(args: ExecutionArgs): AbortSignal | undefined {
  const signal =
    (args as { signal?: unknown }).signal ??
    (args.contextValue as { request?: { signal?: unknown } } | null)?.request?.signal;
  return signal instanceof AbortSignal ? signal : undefined;
}

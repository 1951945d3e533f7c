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
import type { GraphQLFieldResolver } from 'graphql';
import type { Cache } from '../core/cache';
import { type MetricsRegistry, OperationReporting, checkPluginOptions } from '../graphql/reporting';
import { optionNames } from '../core/options';
import { operationRecorder } from '../prometheus/metrics';
import {
  type Lookup,
  type NotStoredReason,
  type ResponseBypassReason,
  type ResponseCacheOptions,
  type ResponseOutcome,
  type ResponsePlan,
  type ResponseRequest,
  type ExecuteApart,
  INCREMENTAL_RESULT,
  ResponseEngine,
} from '../graphql/response-cache';
import { responseCacheHintOf } from '../graphql/response-hint';
import { warnIfUnwrapped } from '../graphql/unwrapped';
import { OnceWarnings } from '../graphql/warnings';
import { invalidOption } from '../core/errors';
import { ApartRunner } from './apart';
import { warnIfApolloDefault } from './default-max-age';

export interface HerdcachePluginOptions<TContext = any> {
  /** The registry the schema's @cached fields and the context's loaders use. */
  cache: Cache;
  /**
   * Adds `extensions.cache` ({ total, sources }) to every response. It shows clients how the
   * cache behaved, so the default is on outside production: `process.env.NODE_ENV !== 'production'`,
   * read when the plugin is created.
   */
  extensions?: boolean;
  /** prom-client Registry to register herdcache's metrics on (needs prom-client installed). Default: no metrics. */
  registry?: MetricsRegistry;
  /** Distinct `operation` label values before the rest count as "other". Default 100. */
  maxOperationLabels?: number;
  /**
   * Caches whole responses too (off by default): `true` or options. A hit is answered before
   * execution; concurrent identical operations share one execution. See docs/response-cache.md.
   */
  responseCache?: boolean | ResponseCacheOptions<TContext>;
  /**
   * The ApolloServer `rootValue` and `fieldResolver` options, when the server is given them: the
   * response cache's background refreshes run the operation apart from Apollo's pipeline and a
   * plugin cannot read the server's options. Without them a refresh runs with no root value and
   * graphql's default field resolver. Default: none.
   */
  rootValue?: unknown;
  fieldResolver?: GraphQLFieldResolver<any, TContext>;
}

const PLUGIN_OPTIONS = optionNames<HerdcachePluginOptions>({
  cache: true,
  extensions: true,
  registry: true,
  maxOperationLabels: true,
  responseCache: true,
  rootValue: true,
  fieldResolver: true,
});

export function herdcachePlugin<TContext extends BaseContext = BaseContext>(
  options: HerdcachePluginOptions<TContext>,
): ApolloServerPlugin<TContext> {
  checkPluginOptions(options, 'herdcachePlugin', PLUGIN_OPTIONS);
  const engine = responseEngine(options);
  const { fieldResolver } = options;
  if (fieldResolver !== undefined && typeof fieldResolver !== 'function')
    throw invalidOption('herdcachePlugin.fieldResolver', fieldResolver, 'a field resolver function');
  const apart =
    engine === undefined
      ? undefined
      : new ApartRunner(engine.defaultMaxAge, {
          rootValue: options.rootValue,
          fieldResolver: fieldResolver as GraphQLFieldResolver<unknown, unknown> | undefined,
        });
  const recorder = operationRecorder(options);
  const schemaWarnings = new OnceWarnings();
  // Executions this plugin's requests started for everyone waiting on their keys and have not
  // handed over yet, by request (see unexpectedErrorProcessingRequest).
  const unfinished = new WeakMap<object, Lookup>();
  const reporting = new OperationReporting({
    cache: options.cache,
    extensions: options.extensions,
    recorder,
    owner: 'herdcachePlugin',
  });

  return {
    async serverWillStart() {
      const stop = recorder === undefined ? undefined : await reporting.start();
      return {
        ...(stop === undefined ? {} : { serverWillStop: async () => stop() }),
        // Called with the schema at start and each gateway update, before Apollo's first execution
        // wraps the schema's resolvers in place: its copy for the runs apart is made then (see
        // ./apart), and @cached fields the transform did not wrap are said (../graphql/unwrapped).
        // A gateway's (a supergraph SDL with it) is never run apart: see ApartRunner.gateway.
        schemaDidLoadOrUpdate: ({ apiSchema, coreSupergraphSdl }) => {
          if (coreSupergraphSdl !== undefined) {
            apart?.gateway(apiSchema);
            return;
          }
          warnIfUnwrapped(apiSchema, schemaWarnings, 'herdcachePlugin');
          apart?.prepare(apiSchema);
        },
      };
    },

    // Apollo skips willSendResponse when a hook throws outside the execution itself (another
    // plugin's executionDidStart or executionDidEnd, a later plugin's responseForOperation): it
    // answers 500 and calls this. An execution such a request started for everyone waiting on its
    // key is handed over as failed here: its waiters contend again instead of waiting forever.
    async unexpectedErrorProcessingRequest({ requestContext, error }) {
      const pending = unfinished.get(requestContext);
      if (pending?.complete === undefined) return;
      unfinished.delete(requestContext);
      await pending.complete({ errors: [error] });
    },

    async requestDidStart({ contextValue }): Promise<GraphQLRequestListener<TContext> | void> {
      const active = reporting.begin(contextValue);
      if (active === undefined && engine === undefined) return; // a context that cannot carry state (frozen, not an object)
      let lookup: Lookup | undefined;
      let outcome: ResponseOutcome = 'bypassed';
      // Why, when the layer did not cache it: not looked up (bypassed), or executed and not stored.
      let reason: { bypassReason: ResponseBypassReason } | { notStoredReason: NotStoredReason } | undefined;
      let request: ResponseRequest | undefined;
      let plan: ResponsePlan | undefined;
      return {
        async responseForOperation(requestContext) {
          if (engine === undefined) return null;
          request = {
            schema: requestContext.schema,
            document: requestContext.document,
            operationName: requestContext.operationName ?? requestContext.request.operationName,
            variables: requestContext.request.variables,
            context: requestContext.contextValue,
          };
          const planned = engine.plan(request);
          if (typeof planned === 'string') {
            reason = { bypassReason: planned };
            return null;
          }
          plan = planned;
          // Runs the operation apart from this request (a background refresh, a re-execution after
          // an invalidation), with Apollo's cache-control hints: see ./apart. Its context aside,
          // the request is the operation (the run gets a context of its own).
          const operation: ResponseRequest = request;
          const runner = apart as ApartRunner; // made with the engine
          const execute: ExecuteApart = (context) => runner.execute(operation, context);
          const found = engine.lookup(planned, execute);
          lookup = found instanceof Promise ? await found : found;
          if (lookup.complete !== undefined) unfinished.set(requestContext, lookup);
          outcome = lookup.outcome;
          if (lookup.outcome === 'bypassed') reason = { bypassReason: lookup.bypassReason };
          else if (lookup.outcome === 'miss' && lookup.notStoredReason !== undefined)
            reason = { notStoredReason: lookup.notStoredReason };
          const stored = lookup.response;
          if (stored === undefined) return null; // this request executes (and shares its result when it can)
          // Answered before execution, with the Cache-Control the stored policy allows and its age.
          requestContext.overallCachePolicy.replace({ maxAge: stored.maxAge, scope: stored.scope });
          const http = requestContext.response.http;
          http.headers.set('age', String(lookup.age));
          return { http, body: { kind: 'single', singleResult: { data: stored.data as Record<string, unknown> } } };
        },

        async willSendResponse(requestContext) {
          const { response, operation: document, operationName, overallCachePolicy, contextValue } = requestContext;
          const single = response.body.kind === 'single' ? response.body.singleResult : undefined;
          // setResponseCacheHint() restricts the policy as info.cacheControl.setCacheHint does. Done
          // before this hook's first await: Apollo's cache-control plugin, which runs after the
          // application's plugins, writes the header from it then.
          const hint = engine === undefined ? undefined : responseCacheHintOf(contextValue);
          if (hint !== undefined) overallCachePolicy.restrict(hint);
          // The static policy can be stricter than Apollo's (a PRIVATE object type behind an
          // interface or union field: see response-policy): the header never says more public.
          // (Not before execution: Apollo's cache-control skips its field policies when the
          // overall one is already restricted.) A header Apollo's plugin already wrote, when it
          // stands before this one in the plugin list, is made private too.
          if (request !== undefined && (plan?.policy ?? engine!.policyOf(request))?.scope === 'PRIVATE') {
            overallCachePolicy.restrict({ scope: 'PRIVATE' });
            const written = response.http.headers.get('cache-control');
            if (written !== undefined && /\bpublic\b/.test(written))
              response.http.headers.set('cache-control', written.replace(/\bpublic\b/, 'private'));
          }
          // A mutation's response is never cacheable over HTTP, as on Yoga: without this, Apollo's
          // header says the hint of the mutation's result type (`max-age=60, public`).
          if (engine !== undefined && document?.operation === 'mutation') overallCachePolicy.restrict({ maxAge: 0 });
          if (lookup?.complete !== undefined && unfinished.delete(requestContext)) {
            // This request executed for everyone waiting on its key: hand its result over (stored
            // and shared only when it has no errors and its final policy is what the key was made for).
            const final = { maxAge: overallCachePolicy.maxAge, scope: overallCachePolicy.scope };
            const completing = lookup.complete(single ?? INCREMENTAL_RESULT, final);
            const completion = typeof completing === 'string' ? completing : await completing;
            if (completion === 'oversized')
              outcome = 'oversized'; // served, not stored: counted apart
            else if (completion !== 'stored') reason = { notStoredReason: completion };
            // On a gateway the policy is the subgraphs' Cache-Control headers, not Apollo's defaultMaxAge.
            if (completion === 'stricter_hint' && !apart!.isGateway(plan!.request.schema))
              warnIfApolloDefault(engine!, plan!, final.maxAge, hint);
          }
          if (
            engine !== undefined &&
            request !== undefined &&
            document?.operation === 'mutation' &&
            single !== undefined
          ) {
            await engine.afterMutation(request, single.data);
          }
          if (engine !== undefined && document !== undefined) reporting.recordResponse(operationName, outcome);
          if (active === undefined) return;
          // `document` is undefined when the request did not parse or validate: nothing ran.
          const report = reporting.end(active, operationName, document !== undefined);
          if (report !== undefined && single !== undefined) {
            const cache =
              engine === undefined
                ? report
                : {
                    ...report,
                    response: outcome,
                    ...(lookup?.response !== undefined ? { age: lookup.age } : reason),
                  };
            single.extensions = { ...single.extensions, cache };
          }
        },
      };
    },
  };
}

function responseEngine(options: HerdcachePluginOptions<any>): ResponseEngine | undefined {
  const { responseCache } = options;
  if (responseCache === undefined || responseCache === false) return undefined;
  return new ResponseEngine(options.cache, responseCache, 'herdcachePlugin()');
}

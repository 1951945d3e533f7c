/**
 * What one GraphQL operation carries in its context: its request scope (per-request memo and
 * per-operation stats) and the directive's bypass counts. The @cached directive, the resolver
 * helpers and the Apollo plugin all find it under one symbol, whoever created it: the context
 * helper (herdcacheContext) or, when the context has none, the plugin at requestDidStart.
 *
 * The property is an own enumerable symbol so `{ ...herdcacheContext({ cache }), user }` keeps it.
 * It is `Symbol.for` so two copies of this module (an ESM and a CJS import) still agree.
 */
import type { Cache } from '../core/cache';
import { invalidArgument, invalidOption } from '../core/errors';
import { Loader } from '../core/loader';
import { checkKnownKeys, optionNames } from '../core/options';
import type { RequestScope, ScopedLoader } from '../core/scope';
import { setOwn } from '../core/metrics';
import type { Counters } from '../core/types';

export const OPERATION: unique symbol = Symbol.for('herdcache.operation');

/** Why a @cached field call was resolved without the cache. */
export type BypassReason =
  /** A non-root field whose parent has no identity: a key shared across parents would mix their values. */
  | 'no_identity'
  /** A PRIVATE field in a request without a session. */
  | 'no_session'
  /** Arguments that cannot be encoded into a key without ambiguity (see canonicalArgs). */
  | 'unkeyable_args'
  /** Arguments whose canonical encoding passes ARGS_MAX_LENGTH (64 Ki characters): keying them would cost more than resolving. */
  | 'args_too_large'
  /** Arguments nested deeper than ARGS_MAX_DEPTH (64). */
  | 'args_too_deep'
  /** A `tags:` placeholder had no value (null, undefined, an object…): the value could not be tagged rightly. */
  | 'no_tag_value';

/** The counters an operation reports (response extension, Prometheus), per source and in total. */
export type CacheReportCounters = Pick<
  Counters,
  'hits' | 'misses' | 'coalesced' | 'staleServed' | 'fills' | 'fillFailures' | 'lockContended'
> & {
  /** @cached field calls resolved without the cache (no parent identity, no session, unkeyable args, a tag without value). */
  bypassed: number;
};

/**
 * `response.extensions.cache`: `total` sums `sources`; a source is a field coordinate
 * ("Query.user"), a loader name, or a getOrCompute label. Sources with all zeros are left out.
 */
export interface CacheReport {
  total: CacheReportCounters;
  sources: Record<string, CacheReportCounters>;
}

const REPORTED = [
  'hits',
  'misses',
  'coalesced',
  'staleServed',
  'fills',
  'fillFailures',
  'lockContended',
] as const satisfies readonly (keyof Counters & keyof CacheReportCounters)[];

function zeroReport(): CacheReportCounters {
  return { hits: 0, misses: 0, coalesced: 0, staleServed: 0, fills: 0, fillFailures: 0, lockContended: 0, bypassed: 0 };
}

/** One operation's cache state. Created by herdcacheContext() or by the Apollo plugin. */
export class OperationCache {
  readonly cache: Cache;
  readonly scope: RequestScope;
  #bypassed: Map<string, number> | undefined;

  constructor(cache: Cache, signal?: AbortSignal) {
    this.cache = cache;
    this.scope = signal === undefined ? cache.request() : cache.request({ signal });
  }

  /**
   * @internal For the response layer, before the operation executes for a whole response: the
   * tags of what it loads through its scope (ctx.loaders, ctx.scope) tag the response too, as its
   * @cached fields' do (the directive notes theirs). Not done otherwise: a loader's tags function
   * would run on every load of every operation for nothing.
   */
  collectTags(): void {
    this.scope._tags = this;
  }

  /** @internal Tags of the @cached values this operation used (the response layer tags its response with them). */
  tagsSeen: Set<string> | undefined;

  /** @internal */
  noteTags(tags: readonly string[]): void {
    const seen = (this.tagsSeen ??= new Set());
    for (const tag of tags) seen.add(tag);
  }

  /** @internal the directive resolved `source` without the cache. */
  countBypass(source: string): void {
    const bypassed = (this.#bypassed ??= new Map());
    bypassed.set(source, (bypassed.get(source) ?? 0) + 1);
  }

  /** What this operation's loads did so far, in the shape of `response.extensions.cache`. */
  report(): CacheReport {
    const stats = this.scope.stats();
    const total = zeroReport();
    const sources: Record<string, CacheReportCounters> = {};
    const add = (source: string): CacheReportCounters =>
      Object.prototype.hasOwnProperty.call(sources, source) ? sources[source]! : setOwn(sources, source, zeroReport());
    for (const [source, counters] of Object.entries(stats.sources)) {
      if (!REPORTED.some((name) => counters[name] !== 0)) continue;
      const row = add(source);
      for (const name of REPORTED) {
        row[name] = counters[name];
        total[name] += counters[name];
      }
    }
    if (this.#bypassed !== undefined) {
      for (const [source, n] of this.#bypassed) {
        add(source).bypassed = n;
        total.bypassed += n;
      }
    }
    return { total, sources };
  }
}

type AnyLoader = Loader<any, any>;

/** `loaders` as the operation sees them: DataLoader semantics per operation, the registry underneath. */
export type ScopedLoaders<L extends Record<string, AnyLoader>> = {
  readonly [N in keyof L]: L[N] extends Loader<infer K, infer V> ? ScopedLoader<K, V> : never;
};

export interface HerdcacheContextOptions<L extends Record<string, AnyLoader>> {
  cache: Cache;
  /** Registry loaders (created once, at startup, with cache.loader()) to expose per operation as `loaders`. */
  loaders?: L;
  /**
   * The request's signal, fired when the client goes away (Yoga: `request.signal`; Node's http:
   * see the README). The operation's loads and @cached fields stop waiting when it fires, and a
   * fill no other request waits on is told to stop. Default: none (they wait for their values).
   */
  signal?: AbortSignal;
}

const CONTEXT_OPTIONS = optionNames<HerdcacheContextOptions<Record<never, AnyLoader>>>({
  cache: true,
  loaders: true,
  signal: true,
});

/** What herdcacheContext() returns: spread it into (or return it as) the operation's context. */
export interface HerdcacheContext<L extends Record<string, AnyLoader> = Record<never, AnyLoader>> {
  /** The operation's request scope: `scope.getOrCompute(key, fill, { ttl, label })`, `scope.load(loader, key)`, `scope.stats()`. */
  readonly scope: RequestScope;
  readonly loaders: ScopedLoaders<L>;
  // The OperationCache also rides on an own enumerable symbol property (kept by a spread); it is
  // left out of this type so a function returning this context needs no import to be declared.
}

/**
 * Per-operation cache state for a GraphQL context. Call it once per operation (in your context
 * function), never once per process: the scope memoizes answers for the life of the operation.
 *
 * ```ts
 * context: async ({ req }) => ({ ...herdcacheContext({ cache, loaders: { user: userLoader } }), viewer: … })
 * // in a resolver: ctx.loaders.user.load(id); ctx.scope.getOrCompute(key, fill, { ttl: 60_000, label: 'Query.top' })
 * ```
 */
export function herdcacheContext<L extends Record<string, AnyLoader> = Record<never, AnyLoader>>(
  options: HerdcacheContextOptions<L>,
): HerdcacheContext<L> {
  if (options === null || typeof options !== 'object')
    throw invalidArgument('options', options, 'an object with a "cache"');
  checkKnownKeys('herdcacheContext()', options, CONTEXT_OPTIONS);
  const { cache, loaders, signal } = options;
  checkCache(cache);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidOption('signal', signal, 'an AbortSignal');
  const operation = new OperationCache(cache, signal);
  const scoped: Record<string, ScopedLoader<unknown, unknown>> = {};
  if (loaders !== undefined) {
    // An array is no map of names: `loaders: [users]` would expose `ctx.loaders[0]`.
    if (loaders === null || typeof loaders !== 'object' || Array.isArray(loaders))
      throw invalidOption('loaders', loaders, 'an object of loaders by name, e.g. { user: cache.loader(...) }');
    for (const [name, loader] of Object.entries(loaders)) {
      if (!(loader instanceof Loader))
        throw invalidOption(`loaders.${name}`, loader, 'a loader created with cache.loader(...)');
      scoped[name] = operation.scope.loader(loader);
    }
  }
  const context = { scope: operation.scope, loaders: scoped as ScopedLoaders<L>, [OPERATION]: operation };
  made.set(operation, { loaders, scoped, signal });
  return context;
}

/**
 * How herdcacheContext made an operation state (its loaders, its signal): a shallow copy of the
 * context (Apollo's batched HTTP requests) is given its own scope and loaders made the same way.
 */
const made = new WeakMap<OperationCache, Recipe>();

interface Recipe {
  readonly loaders: Record<string, AnyLoader> | undefined;
  readonly scoped: object;
  readonly signal: AbortSignal | undefined;
}

/** The operation's cache state in `context`, if any (from herdcacheContext() or the plugin). */
export function operationOf(context: unknown): OperationCache | undefined {
  if (context === null || (typeof context !== 'object' && typeof context !== 'function')) return undefined;
  const operation = (context as { [OPERATION]?: unknown })[OPERATION];
  return operation instanceof OperationCache ? operation : undefined;
}

/** The current operation's request scope, for resolvers: `requestScope(ctx)?.getOrCompute(...)`. */
export function requestScope(context: unknown): RequestScope | undefined {
  return operationOf(context)?.scope;
}

/** The current operation's cache report (the extension's content), for servers other than Apollo. */
export function cacheReport(context: unknown): CacheReport | undefined {
  return operationOf(context)?.report();
}

/**
 * @internal For the plugin: the context's operation state, creating and attaching it when the
 * context has none (`created`). Undefined when the context cannot carry it (not an extensible object).
 */
export function attachOperation(
  context: unknown,
  cache: Cache,
): { operation: OperationCache; created: boolean } | undefined {
  const existing = operationOf(context);
  // Apollo runs each operation of a batched HTTP request on a shallow copy of one context, which
  // copies this property too: an operation state already claimed by a running operation is not
  // shared; the copy gets its own, so reports and metrics are not mixed or counted twice.
  if (existing !== undefined && !claimed.has(existing)) {
    claimed.add(existing);
    return { operation: existing, created: false };
  }
  if (context === null || typeof context !== 'object' || !Object.isExtensible(context)) return undefined;
  const recipe = existing === undefined ? undefined : made.get(existing);
  const operation = new OperationCache(cache, recipe?.signal);
  (context as { [OPERATION]?: OperationCache })[OPERATION] = operation;
  claimed.add(operation);
  // A copy of herdcacheContext's context: its `scope` and `loaders` are the first operation's (their
  // memo, their counts); it gets its own, made as herdcacheContext made them (kept for good: see
  // detachOperation).
  if (recipe !== undefined && existing!.cache === cache)
    ownScope(context as Record<string, unknown>, existing!, operation, recipe);
  return { operation, created: true };
}

/**
 * @internal The operation state of a run apart (the response layer's re-execution or refresh) on
 * `context`, a copy of a waiting request's: a new one, and when that request's context came from
 * herdcacheContext, its own `scope` and `loaders` too, so that what it loads through them tags its
 * response (and is memoized for it alone), not the lent request's.
 */
export function operationApart(context: Record<string | symbol, unknown>, cache: Cache): OperationCache {
  const existing = operationOf(context);
  const operation = new OperationCache(cache);
  context[OPERATION] = operation;
  const recipe = existing === undefined ? undefined : made.get(existing);
  if (recipe !== undefined && existing!.cache === cache) ownScope(context, existing!, operation, recipe);
  return operation;
}

/**
 * Gives `context` (a copy of `existing`'s) a scope and loaders of its own, made as herdcacheContext
 * made them, and notes how, so that a copy of this copy (a run apart lent this operation's context:
 * the 2nd operation of an Apollo batch) gets its own in turn.
 */
function ownScope(
  context: Record<string, unknown>,
  existing: OperationCache,
  operation: OperationCache,
  recipe: Recipe,
): void {
  const { loaders, scoped: first } = recipe;
  if (context.scope === existing.scope) context.scope = operation.scope;
  let scoped: Record<string, ScopedLoader<unknown, unknown>> | undefined;
  if (loaders !== undefined && context.loaders === first) {
    scoped = {};
    for (const [name, loader] of Object.entries(loaders))
      scoped[name] = operation.scope.loader(loader as Loader<unknown, unknown>);
    context.loaders = scoped;
  }
  made.set(operation, {
    loaders: scoped === undefined ? undefined : loaders,
    scoped: scoped ?? {},
    signal: recipe.signal,
  });
}

/** Operation states in use by a running operation. */
const claimed = new WeakSet<OperationCache>();

/** @internal The operation ended: releases its state, and removes it if attachOperation created it. */
export function detachOperation(context: unknown, operation: OperationCache, created: boolean): void {
  claimed.delete(operation);
  if (created && operationOf(context) === operation) delete (context as { [OPERATION]?: OperationCache })[OPERATION];
}

export function checkCache(cache: unknown): asserts cache is Cache {
  const candidate = cache as Partial<Cache> | null;
  if (
    candidate === null ||
    typeof candidate !== 'object' ||
    typeof candidate.request !== 'function' ||
    typeof candidate.getOrCompute !== 'function'
  ) {
    throw invalidOption('cache', cache, 'a cache created with createCache()');
  }
}

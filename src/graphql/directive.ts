/**
 * The @cached(ttl:, swr:, scope:, tags:) schema transform, in plain graphql-js terms; it also
 * installs @invalidates(tags:) on mutation fields (see ./invalidates).
 *
 * Every field carrying the directive gets its resolver wrapped: the call is keyed (type, field,
 * parent identity, canonical arguments, and the session for PRIVATE fields) and answered through
 * the registry's getOrCompute, so a stampede on the field costs one resolver call per key, SWR and
 * the fill lock apply, and keys missed in one tick (the siblings of a list) leave in one store
 * read. Through the operation's request scope when the context has one, so the field's hits,
 * misses and coalescing are attributed to the operation.
 *
 * Only types are imported from graphql: the module loads without it (graphql is an optional peer),
 * and works on the schema object it is given, whichever copy of graphql built it.
 */
import type {
  GraphQLField,
  GraphQLFieldResolver,
  GraphQLInterfaceType,
  GraphQLObjectType,
  GraphQLResolveInfo,
  GraphQLSchema,
} from 'graphql';
import type { Cache } from '../core/cache';
import { HerdcacheError, describe, invalidOption } from '../core/errors';
import { MemoKey, checkTagsSupported, computationOf } from '../core/internal';
import { MEMO_KEY_MAX } from '../core/long-keys';
import { checkKnownKeys, optionNames } from '../core/options';
import type { GetOrComputeOptions } from '../core/types';
import { answerField } from './cached-call';
import { partialOrThrow } from './settle';
import { defaultFieldResolver, isListField, kindOf, propertyOf } from './schema-reading';
import { entitySite, planEntity } from './entities';
import { defaultIdentity, requiredFields } from './federation-directives';
import { cachedFieldHint, restrictCacheHint } from './hints';
import { sharedFailureFor } from './failures';
import { invalidatingResolver, readInvalidates } from './invalidates';
import { DEFAULT_KEY_PREFIX, encodeArgs, fieldKeyAfter, fieldKeyHead, identityOfParent, withRequired } from './keys';
import { TRANSFORM_SESSION_OPTION, sessionFrom } from './session';
import { OnceWarnings, notifyQuietly } from './warnings';
import { type CacheScope, type CachedPolicy, buildError, literal, readCachedPolicy, withHintedScope } from './policy';
import { isComposite, namedType, privateByCacheControl, tagOf } from './schema-hints';
import { type BypassReason, checkCache, operationOf } from './request';
import { type TemplateSite, UnfilledTag, fillTags } from './tags';
import { installed, markWrapped } from './wrapped';

export type { CacheScope };

export interface CachedDirectiveOptions<TContext = any> {
  /** The registry every @cached field goes through. */
  cache: Cache;
  /**
   * The viewer's session for PRIVATE fields: a stable, non-secret id (a user id, not a bearer
   * token: it becomes part of store keys). A finite number or a bigint counts as its string (42 and "42" are
   * one session), as loader keys do. Anything else (undefined, null, "", NaN, a boolean, an
   * object) means no session: resolved without the cache, counted as bypassed ("no_session").
   * Returned synchronously: a Promise (an async function) or an object is no session by mistake,
   * warned of once per transform (process.emitWarning, HERDCACHE_SESSION_ID). Required when any
   * field is PRIVATE.
   */
  sessionId?: (context: TContext) => string | number | bigint | false | null | undefined;
  /**
   * Parent identity per type, for non-root @cached fields: a property name, or a function of the
   * parent returning a string or number. Default for every type: the parent's `id`. A parent
   * without identity is resolved without the cache (bypassed and counted), never under a shared key.
   */
  identity?: Readonly<Record<string, string | ((parent: any) => unknown)>>;
  /** Prefix of every key this transform makes. Change it to drop all cached fields (e.g. on deploy). Default "gql:". */
  keyPrefix?: string;
  /** Called when a @cached field call is resolved without the cache (also counted as `bypassed`). */
  onBypass?: (coordinate: string, reason: BypassReason, context: TContext) => void;
  /**
   * Called when an @invalidates mutation could not invalidate everything it declares: a tag
   * template without a value in this call (e.g. `{result.id}` of a null result), or
   * cache.invalidateTags rejecting. The mutation still succeeds. Default: console.warn.
   * (A store failure inside invalidateTags does not reach here: the registry counts it in
   * `storeErrors` and calls `hooks.onStoreError(error, 'invalidateTags')`.)
   */
  onInvalidationError?: (coordinate: string, error: Error, context: TContext) => void;
}

/**
 * Wraps, in place, the resolver of every field of `schema` that carries @cached or @invalidates,
 * and returns `schema`. Throws at build time, naming the field, for: @cached on a Mutation or
 * Subscription field or on an interface field, a bad `ttl`/`swr`/`scope`, PRIVATE without the
 * `sessionId` option, @invalidates outside the Mutation type or without tags, an invalid tag
 * template (see parseTagTemplate), tags on a store that cannot invalidate them, an `identity`
 * entry for a type the schema lacks, and a schema already transformed.
 */
const DIRECTIVE_OPTIONS = optionNames<CachedDirectiveOptions>({
  cache: true,
  sessionId: true,
  identity: true,
  keyPrefix: true,
  onBypass: true,
  onInvalidationError: true,
});

export function cachedDirectiveTransformer<S extends GraphQLSchema>(schema: S, options: CachedDirectiveOptions): S {
  if (
    schema === null ||
    typeof schema !== 'object' ||
    typeof (schema as Partial<GraphQLSchema>).getTypeMap !== 'function'
  ) {
    throw new HerdcacheError(
      'E_INVALID_ARGUMENT',
      `herdcache: argument "schema" must be a GraphQLSchema, got ${describe(schema)}`,
    );
  }
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, 'an object with a "cache"');
  checkKnownKeys('cachedDirectiveTransformer()', options, DIRECTIVE_OPTIONS);
  const {
    cache,
    sessionId,
    identity = {},
    keyPrefix = DEFAULT_KEY_PREFIX,
    onBypass,
    onInvalidationError = warnInvalidationError,
  } = options;
  checkCache(cache);
  if (sessionId !== undefined && typeof sessionId !== 'function')
    throw invalidOption('sessionId', sessionId, 'a function of the context');
  if (typeof keyPrefix !== 'string') throw invalidOption('keyPrefix', keyPrefix, 'a string');
  if (onBypass !== undefined && typeof onBypass !== 'function') throw invalidOption('onBypass', onBypass, 'a function');
  if (typeof onInvalidationError !== 'function')
    throw invalidOption('onInvalidationError', onInvalidationError, 'a function');
  if (identity === null || typeof identity !== 'object')
    throw invalidOption('identity', identity, 'an object of type name → property name or function');
  const typeMap = schema.getTypeMap();
  for (const [typeName, id] of Object.entries(identity)) {
    if (typeof id !== 'function' && (typeof id !== 'string' || id.length === 0)) {
      throw invalidOption(`identity.${typeName}`, id, 'a property name or a function of the parent');
    }
    if (kindOf(typeMap[typeName]) !== 'object')
      throw invalidOption('identity', typeName, 'keys naming object types of the schema');
  }

  const queryType = schema.getQueryType();
  const mutationType = schema.getMutationType();
  const forbidden = new Map<unknown, string>([
    [mutationType, 'mutations change data and must run every time'],
    [schema.getSubscriptionType(), 'subscription events are not cacheable'],
  ]);
  const plans: [GraphQLField<unknown, unknown>, () => GraphQLFieldResolver<unknown, unknown>][] = [];
  const warnings = new OnceWarnings();
  const entityPlans: (() => void)[] = [];
  for (const type of Object.values(typeMap)) {
    const kind = kindOf(type);
    if (kind === undefined || type.name.startsWith('__')) continue;
    if (kind === 'object') {
      const entityPolicy = readCachedPolicy(type, type.name, entitySite(type as GraphQLObjectType));
      if (entityPolicy !== undefined)
        entityPlans.push(
          planEntity(
            schema,
            type as GraphQLObjectType,
            entityPolicy,
            { cache, sessionId, keyPrefix, onBypass, warnings },
            installed,
          ),
        );
    }
    const fields = (type as GraphQLObjectType | GraphQLInterfaceType).getFields();
    for (const field of Object.values(fields) as GraphQLField<unknown, unknown>[]) {
      const coordinate = `${type.name}.${field.name}`;
      const isRoot = type === queryType || type === mutationType;
      const site = (directive: 'cached' | 'invalidates'): TemplateSite => ({ directive, coordinate, field, isRoot });
      const invalidates = readInvalidates(
        field,
        coordinate,
        type === mutationType && kind === 'object',
        site('invalidates'),
        literal,
      );
      if (invalidates !== undefined) {
        checkTagsSupported(cache, `@invalidates on ${coordinate}`);
        checkNotInstalled(field, coordinate);
        plans.push([
          field,
          () =>
            invalidatingResolver(field.resolve ?? defaultFieldResolver, coordinate, invalidates, {
              cache,
              onInvalidationError,
            }),
        ]);
      }
      const read = readCachedPolicy(field, coordinate, site('cached'));
      if (read === undefined) continue;
      const why = forbidden.get(type);
      if (why !== undefined) throw buildError(`@cached cannot be used on ${coordinate}: ${why}`);
      if (kind === 'interface') {
        throw buildError(
          `@cached cannot be used on the interface field ${coordinate}: put it on the fields of the object types that implement it`,
        );
      }
      const hinted = read.scope === 'PUBLIC' && !read.scopeGiven;
      const policy = withHintedScope(
        read,
        hinted ? privateByCacheControl(schema, field, coordinate) : undefined,
        coordinate,
        sessionId !== undefined,
      );
      checkNotInstalled(field, coordinate);
      const id = identity[type.name];
      const parentIdentity = isRoot
        ? undefined
        : typeof id === 'function'
          ? id
          : typeof id === 'string'
            ? propertyOf(id)
            : defaultIdentity(schema, type as GraphQLObjectType);
      // A Federation field's @requires: its value depends on those parent fields too (sent by the
      // gateway, or by any client of the subgraph): they are part of its key.
      const required = parentIdentity === undefined ? [] : requiredFields(schema, field, coordinate);
      const identityOf =
        parentIdentity === undefined || required.length === 0 ? parentIdentity : withRequired(parentIdentity, required);
      if (policy.tags !== undefined) checkTagsSupported(cache, `@cached(tags:) on ${coordinate}`);
      plans.push([
        field,
        () =>
          cachedResolver(field, coordinate, policy, { cache, sessionId, identityOf, keyPrefix, onBypass, warnings }),
      ]);
    }
  }
  // Loaders and @cached fields never share keys whatever the prefix: field keys live in their own
  // namespace (core/namespaces), which no loader or getOrCompute key can spell.
  // Everything validated before anything is changed: a build error leaves the schema untouched.
  for (const [field, wrap] of plans) {
    const resolve = wrap();
    installed.add(resolve);
    field.resolve = resolve;
    markWrapped(field);
  }
  for (const install of entityPlans) install();
  return schema;
}

function checkNotInstalled(field: GraphQLField<unknown, unknown>, coordinate: string): void {
  if (field.resolve !== undefined && installed.has(field.resolve)) {
    throw buildError(
      `${coordinate} is already wrapped by cachedDirectiveTransformer: transform a freshly built schema`,
    );
  }
}

function warnInvalidationError(_coordinate: string, error: Error): void {
  console.warn(error.message);
}

interface WrapEnv {
  readonly cache: Cache;
  readonly sessionId: ((context: any) => string | number | bigint | false | null | undefined) | undefined;
  /** undefined on root (Query) fields: they have no parent to identify. */
  readonly identityOf: ((parent: any) => unknown) | undefined;
  readonly keyPrefix: string;
  readonly onBypass: CachedDirectiveOptions['onBypass'];
  /** The transform's one-time warnings (a sessionId answering a Promise…): see ./session. */
  readonly warnings: OnceWarnings;
}

/** canonicalArgs of a call without arguments. */
const NO_ARGS = '{}';

/** Keys remembered per field (see keysByIdentity). */
const KEY_MEMO_MAX = 4096;

function cachedResolver(
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
  policy: CachedPolicy,
  env: WrapEnv,
): GraphQLFieldResolver<unknown, unknown> {
  const resolve = field.resolve ?? defaultFieldResolver;
  const { cache, sessionId, identityOf, keyPrefix, onBypass, warnings } = env;
  const isPrivate = policy.scope === 'PRIVATE';
  // The field's source and policy, resolved and validated once: a call resolves nothing (unless
  // its tags depend on the call).
  const base: GetOrComputeOptions =
    policy.swrMs > 0
      ? { ttl: policy.ttlMs, swr: policy.swrMs, label: coordinate }
      : { ttl: policy.ttlMs, label: coordinate };
  const templates = policy.tags;
  const staticTags = templates?.every((template) => template.placeholders.length === 0)
    ? (fillTags(templates, { args: undefined }) as string[])
    : undefined;
  const computation = computationOf(
    cache,
    staticTags === undefined || staticTags.length === 0 ? base : { ...base, tags: staticTags },
  );
  const dynamicTags = staticTags === undefined ? templates : undefined;
  const keyHead = fieldKeyHead(keyPrefix, coordinate);
  // Keys of the field's calls without arguments or session (most calls), by parent identity ("" on
  // a root field: identities are never empty). Building `prefix…[identity,{}]` anew costs each
  // call a string to build and then hash in the store's and the request's maps; a key kept here
  // is built and hashed once, and numbered (a MemoKey) so the request remembers its answer
  // without a Map. Bounded: the first KEY_MEMO_MAX identities only, and only identities of up to
  // MEMO_KEY_MAX characters (a parent's id may come from the client).
  const keysByIdentity = new Map<string, MemoKey>();
  const hint = cachedFieldHint(policy.ttlMs, policy.scope);
  // A field declaring no arguments is always called with none: nothing to encode per call.
  const takesArgs = field.args.length > 0;
  const isList = isListField(field.type);
  // Only a list, an object or a custom scalar's value can come back a Partial (./settle): the
  // built-in scalars' and enums' answers skip the unwrapping step (one promise hop less).
  const named = namedType(field.type);
  const partial = isList || isComposite(named) || (tagOf(named) === 'GraphQLScalarType' && !BUILT_IN.has(named.name));
  // A PUBLIC field whose callers have sessions: a failure is handed only to callers of the
  // leader's session (PRIVATE keys hold the session, so their flights never mix sessions).
  const guardFailures = !isPrivate && sessionId !== undefined;
  const sessionOf = (context: unknown): string | undefined => {
    try {
      return sessionFrom(sessionId!(context), TRANSFORM_SESSION_OPTION, warnings);
    } catch {
      return undefined;
    }
  };

  // Resolved without the cache, and counted: never answered under a key that could be shared.
  const bypass = (
    parent: unknown,
    args: Record<string, unknown>,
    context: unknown,
    info: GraphQLResolveInfo,
    reason: BypassReason,
  ): unknown => {
    operationOf(context)?.countBypass(coordinate);
    notifyQuietly(onBypass, coordinate, reason, context);
    return resolve(parent, args, context, info);
  };

  return function cachedResolve(parent, args, context, info) {
    restrictCacheHint(info, hint); // the response's cache-control: never longer or more public than this field's cache
    let identity: string | undefined;
    if (identityOf !== undefined) {
      identity = parent !== null && typeof parent === 'object' ? identityOfParent(identityOf, parent) : undefined;
      if (identity === undefined) return bypass(parent, args, context, info, 'no_identity');
    }
    let session: string | undefined;
    if (isPrivate) {
      session = sessionOf(context); // a sessionId that throws is no session: bypassed, never a failed field
      if (session === undefined) return bypass(parent, args, context, info, 'no_session');
    }
    // Bounded before anything is built (size, depth): hostile arguments are resolved uncached.
    const encodedArgs = takesArgs ? encodeArgs(args) : NO_ARGS;
    if (encodedArgs === 'unkeyable_args' || encodedArgs === 'args_too_large' || encodedArgs === 'args_too_deep')
      return bypass(parent, args, context, info, encodedArgs);
    let call = computation;
    if (dynamicTags !== undefined) {
      // Tagged wrongly, the value would survive the invalidation meant for it: not cached at all.
      const tags = fillTags(dynamicTags, { args, parent });
      if (tags instanceof UnfilledTag) return bypass(parent, args, context, info, 'no_tag_value');
      if (tags.length > 0) call = computationOf(cache, { ...base, tags });
    }
    let key: string;
    let memoKey: MemoKey | undefined;
    if (
      encodedArgs === NO_ARGS &&
      session === undefined &&
      (identity === undefined || identity.length <= MEMO_KEY_MAX)
    ) {
      memoKey = keysByIdentity.get(identity ?? '');
      if (memoKey !== undefined) key = memoKey.key;
      else {
        key = fieldKeyAfter(keyHead, identity, encodedArgs, undefined);
        // Never dropped: a request remembers its answer by the MemoKey object, so a key must keep
        // one object, or none, for good. Keys past the bound go by their string (a Map per request).
        if (keysByIdentity.size < KEY_MEMO_MAX) keysByIdentity.set(identity ?? '', (memoKey = new MemoKey(key)));
      }
    } else {
      key = fieldKeyAfter(keyHead, identity, encodedArgs, session);
    }
    // A whole-response entry holding this value must be invalidated with it.
    if (call.policy.tags !== undefined) operationOf(context)?.noteTags(call.policy.tags);
    // The first caller's resolver computes the value for every caller of this key: a PUBLIC
    // field's value must depend only on what is in its key.
    if (!guardFailures) {
      const answer = answerField(cache, call, key, memoKey, resolve, parent, args, context, info, undefined, isList);
      // A value part of which failed (a list's item, an object's property: not cached) is answered
      // as it is, as without a cache (./settle).
      return partial && answer instanceof Promise ? answer.then(undefined, partialOrThrow) : answer;
    }
    // Its failure need not: the error was built for the leader's request (its user, its
    // authorization), so callers of other sessions get a generic error instead (./failures).
    const answer = answerField(cache, call, key, memoKey, resolve, parent, args, context, info, sessionOf, isList);
    if (!(answer instanceof Promise)) return answer; // a hit: no failure to hand
    return answer.then(undefined, (error: unknown) =>
      partialOrThrow(sharedFailureFor(error, coordinate, sessionOf(context))),
    );
  };
}

/** graphql-js's built-in scalars (their values are never plain objects or lists). */
const BUILT_IN: ReadonlySet<string> = new Set(['String', 'Int', 'Float', 'Boolean', 'ID']);

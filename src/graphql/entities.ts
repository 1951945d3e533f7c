/**
 * @cached on a Federation entity type (`type Product @key(fields: "id") @cached(ttl: 60)`): its
 * reference resolution (`__resolveReference`, which a subgraph's `_entities` field calls once per
 * representation) goes through the registry like a @cached field's resolver does. So:
 * - one call per entity key however many `_entities` requests (and gateway replicas, with the
 *   Redis fill lock) ask for it at once: single-flight;
 * - the misses of one `_entities` request (its representations are resolved in one synchronous
 *   loop) leave in one store read (one MGET on Redis), as sibling fields do;
 * - tags are filled from the representation (`"Product:{id}"`), so `@invalidates` and
 *   `cache.invalidateTags` drop entities as they drop fields.
 *
 * The key is the type and the representation without `__typename`, canonical (keys sorted at every
 * depth): `gql:Product.__resolveReference:[null,{"id":"1"}]`, what `cachedFieldKey(
 * 'Product.__resolveReference', { args: { id: '1' } })` gives. A representation that also carries
 * `@requires` fields is keyed with them: the resolved entity may depend on them.
 *
 * Where @apollo/subgraph keeps the function: `type.extensions.apollo.subgraph.resolveReference`
 * (2.x), or `type.resolveReference` (older builds, and schemas made by hand).
 */
import type { GraphQLField, GraphQLObjectType, GraphQLResolveInfo, GraphQLSchema } from 'graphql';
import type { Cache } from '../core/cache';
import { checkTagsSupported, computationOf } from '../core/internal';
import type { GetOrComputeOptions } from '../core/types';
import { answerKeyed } from './cached-call';
import { partialOrThrow, settleValue } from './settle';
import { failedIn, sharedFailureFor } from './failures';
import { federationNames, keyFieldSets } from './federation-directives';
import { cachedFieldHint, restrictCacheHint } from './hints';
import { encodeArgs, fieldKeyAfter, fieldKeyHead } from './keys';
import { TRANSFORM_SESSION_OPTION, sessionFrom } from './session';
import { type OnceWarnings, notifyQuietly } from './warnings';
import { type CachedPolicy, buildError, withHintedScope } from './policy';
import { privateEntityHint } from './schema-hints';
import { type BypassReason, operationOf } from './request';
import { type TemplateSite, UnfilledTag, fillTags } from './tags';

export type ReferenceResolver = (
  reference: Record<string, unknown>,
  context: unknown,
  info: GraphQLResolveInfo,
) => unknown;

export interface EntityEnv {
  readonly cache: Cache;
  readonly sessionId: ((context: any) => string | number | bigint | false | null | undefined) | undefined;
  readonly keyPrefix: string;
  readonly onBypass: ((coordinate: string, reason: BypassReason, context: any) => void) | undefined;
  /** The transform's one-time warnings (a sessionId answering a Promise…): see ./session. */
  readonly warnings: OnceWarnings;
}

/** The coordinate entity values are counted and keyed under. */
export function entityCoordinate(type: GraphQLObjectType): string {
  return `${type.name}.__resolveReference`;
}

/** Where tag templates of a type-level @cached are checked: a parent (the representation), no arguments. */
export function entitySite(type: GraphQLObjectType): TemplateSite {
  const field = { name: '__resolveReference', args: [], type } as unknown as GraphQLField<unknown, unknown>;
  return { directive: 'cached', coordinate: entityCoordinate(type), field, isRoot: false };
}

/**
 * Checks a type-level @cached and returns what installs it; throws a build error naming the type
 * when the type is no entity (no @key) or has no reference resolver to cache.
 */
export function planEntity(
  schema: GraphQLSchema,
  type: GraphQLObjectType,
  policy: CachedPolicy,
  env: EntityEnv,
  wrapped: WeakSet<object>,
): () => void {
  const where = `the type ${type.name}`;
  const keys = keyFieldSets(type, federationNames(schema, 'key'));
  if (keys.length === 0) {
    throw buildError(
      `@cached on ${where}: on a type, @cached caches a Federation entity's reference resolution (__resolveReference) and needs @key; put @cached on fields otherwise`,
    );
  }
  const slot = referenceSlot(type);
  if (slot === undefined) {
    throw buildError(
      `@cached on ${where}: it has no __resolveReference to cache; transform the schema after its resolvers are attached (after buildSubgraphSchema)`,
    );
  }
  if (wrapped.has(slot.resolve))
    throw buildError(
      `${entityCoordinate(type)} is already wrapped by cachedDirectiveTransformer: transform a freshly built schema`,
    );
  // @cacheControl(scope: PRIVATE) on the type, or on a field read from the cached object (no
  // resolver of its own), makes a @cached without a scope PRIVATE too, as on a @cached field.
  const hinted = policy.scope === 'PUBLIC' && !policy.scopeGiven ? privateEntityHint(schema, type) : undefined;
  policy = withHintedScope(policy, hinted, where, env.sessionId !== undefined);
  if (policy.tags !== undefined) checkTagsSupported(env.cache, `@cached(tags:) on ${where}`);
  return () => {
    const resolve = cachedReferenceResolver(type, slot.resolve, policy, env, keys);
    wrapped.add(resolve);
    slot.install(resolve);
  };
}

/** The type's reference resolver (`__resolveReference`) as @apollo/subgraph keeps it, if any. */
export function referenceResolverOf(type: GraphQLObjectType): ReferenceResolver | undefined {
  return referenceSlot(type)?.resolve;
}

function referenceSlot(
  type: GraphQLObjectType,
): { resolve: ReferenceResolver; install(resolve: ReferenceResolver): void } | undefined {
  const extensions = type.extensions as { apollo?: { subgraph?: { resolveReference?: unknown } } } | null | undefined;
  const apollo = extensions?.apollo;
  const subgraph = apollo?.subgraph;
  if (typeof subgraph?.resolveReference === 'function') {
    return {
      resolve: subgraph.resolveReference as ReferenceResolver,
      // New objects, not a write into ones that may be shared with another schema.
      install: (resolve) => {
        (type as { extensions: unknown }).extensions = {
          ...extensions,
          apollo: { ...apollo, subgraph: { ...subgraph, resolveReference: resolve } },
        };
      },
    };
  }
  const legacy = type as unknown as { resolveReference?: unknown };
  if (typeof legacy.resolveReference === 'function') {
    return {
      resolve: legacy.resolveReference as ReferenceResolver,
      install: (resolve) => void (legacy.resolveReference = resolve),
    };
  }
  return undefined;
}

function cachedReferenceResolver(
  type: GraphQLObjectType,
  resolve: ReferenceResolver,
  policy: CachedPolicy,
  env: EntityEnv,
  keys: readonly (readonly string[])[],
): ReferenceResolver {
  const { cache, sessionId, keyPrefix, onBypass, warnings } = env;
  const coordinate = entityCoordinate(type);
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
  const hint = cachedFieldHint(policy.ttlMs, policy.scope);
  const isPrivate = policy.scope === 'PRIVATE';
  const guardFailures = !isPrivate && sessionId !== undefined;

  const bypass = (
    reference: Record<string, unknown>,
    context: unknown,
    info: GraphQLResolveInfo,
    reason: BypassReason,
  ): unknown => {
    operationOf(context)?.countBypass(coordinate);
    notifyQuietly(onBypass, coordinate, reason, context);
    return resolve(reference, context, info);
  };

  // As the directive's fields: a sessionId that throws is no session (bypassed), never a failed entity.
  const sessionOf = (context: unknown): string | undefined => {
    try {
      return sessionFrom(sessionId!(context), TRANSFORM_SESSION_OPTION, warnings);
    } catch {
      return undefined;
    }
  };

  return function cachedResolveReference(reference, context, info) {
    restrictCacheHint(info, hint);
    if (reference === null || typeof reference !== 'object') return bypass(reference, context, info, 'no_identity');
    const { __typename: _typename, ...fields } = reference;
    // The representation comes from the client (through the gateway): bounded as @cached
    // arguments are (size, depth) before anything is built, resolved uncached past the bounds.
    const encoded = encodeArgs(fields);
    if (encoded === 'unkeyable_args' || encoded === 'args_too_large' || encoded === 'args_too_deep')
      return bypass(reference, context, info, encoded);
    // Keyed only by a representation that carries the fields of one of its @key (else a client
    // could plant an entry under any shape): without them it is resolved without the cache.
    if (encoded === '{}' || !keys.some((names) => names.every((name) => fields[name] != null)))
      return bypass(reference, context, info, 'no_identity');
    let session: string | undefined;
    if (isPrivate) {
      session = sessionOf(context);
      if (session === undefined) return bypass(reference, context, info, 'no_session');
    }
    let call = computation;
    if (dynamicTags !== undefined) {
      const tags = fillTags(dynamicTags, { args: undefined, parent: reference });
      if (tags instanceof UnfilledTag) return bypass(reference, context, info, 'no_tag_value');
      if (tags.length > 0) call = computationOf(cache, { ...base, tags });
    }
    const key = fieldKeyAfter(keyHead, undefined, encoded, session);
    if (!guardFailures) {
      const answer = answerKeyed(cache, call, key, context, () => settleValue(resolve(reference, context, info)));
      // An entity part of which failed (not cached) is answered as it is, as without a cache (./settle).
      return answer instanceof Promise ? answer.then(undefined, partialOrThrow) : answer;
    }
    // A PUBLIC entity's failure is the leader's (its user, its authorization): callers of other
    // sessions get a generic error instead, as on fields (./failures).
    const fill = async () => {
      try {
        return await settleValue(resolve(reference, context, info));
      } catch (thrown) {
        throw failedIn(thrown, sessionOf(context));
      }
    };
    const answer = answerKeyed(cache, call, key, context, fill);
    if (!(answer instanceof Promise)) return answer; // a hit: no failure to hand
    return answer.then(undefined, (error: unknown) =>
      partialOrThrow(sharedFailureFor(error, coordinate, sessionOf(context))),
    );
  };
}

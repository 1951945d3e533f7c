/**
 * Runs an operation apart from the request that asked for it (a background refresh, the
 * re-execution after an invalidation: see graphql/response-cache) with Apollo's cache-control
 * semantics. A plugin cannot reach the server (executeOperation), and a bare graphql `execute`
 * has no `info.cacheControl`: a resolver's dynamic hint (`info.cacheControl.setCacheHint`, the
 * @cached directive's own) would be skipped and a PRIVATE answer stored as PUBLIC.
 *
 * So the operation runs on a copy of the schema (made once per schema: ./schema-copy) whose field resolvers
 * call Apollo's own cache-control plugin, as Apollo's pipeline does: the execution ends with the
 * policy Apollo would have computed, runtime hints included, and the response layer stores it
 * only when that policy is what its key was made for. The user's schema is not changed.
 */
import type { GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import type { ExecutedResult, FinalPolicy, ResponseRequest } from '../graphql/response-types';
import { copySchema } from './schema-copy';

/** The hook the copy's resolvers call: Apollo's cache-control plugin's willResolveField. */
type WillResolveField = (field: {
  source: unknown;
  args: unknown;
  contextValue: unknown;
  info: unknown;
}) => ((error: unknown, result?: unknown) => void) | void;

const WILL_RESOLVE: unique symbol = Symbol('herdcache.willResolveField');

interface Instrumented {
  readonly schema: GraphQLSchema;
  readonly plugin: CacheControlPlugin;
}

/** Apollo's cache-control plugin, as far as this module drives it. */
interface CacheControlPlugin {
  serverWillStart?(service: { schema: GraphQLSchema }): Promise<unknown>;
  requestDidStart?(requestContext: {
    overallCachePolicy: Policy;
  }): Promise<{ executionDidStart?(): Promise<{ willResolveField?: WillResolveField } | void> } | void>;
}

const copies = new WeakMap<GraphQLSchema, Map<number, Promise<Instrumented>>>();

/** The request's operation (its context aside: the run gets its own copy). */
export interface ApartOperation extends Omit<ResponseRequest, 'context'> {
  /** The cache-control plugin's defaultMaxAge (the response layer's). */
  readonly defaultMaxAge: number;
}

export async function executeApart(
  operation: ApartOperation,
  context: object,
): Promise<ExecutedResult & { final: FinalPolicy }> {
  const graphql = await import('graphql');
  const { schema, plugin } = await instrumented(operation.schema, operation.defaultMaxAge);
  const policy = new Policy();
  const listener = await plugin.requestDidStart?.({ overallCachePolicy: policy });
  const execution = await listener?.executionDidStart?.();
  const willResolveField = execution?.willResolveField;
  // Without the plugin's field hook the policy cannot be known: not cacheable.
  if (willResolveField === undefined) policy.restrict({ maxAge: 0 });
  else (context as { [WILL_RESOLVE]?: WillResolveField })[WILL_RESOLVE] = willResolveField.bind(execution);
  const result = await graphql.execute({
    schema,
    document: operation.document,
    operationName: operation.operationName,
    variableValues: operation.variables,
    contextValue: context,
  });
  return { data: result.data, errors: result.errors, final: { maxAge: policy.maxAge, scope: policy.scope } };
}

function instrumented(schema: GraphQLSchema, defaultMaxAge: number): Promise<Instrumented> {
  let byMaxAge = copies.get(schema);
  if (byMaxAge === undefined) copies.set(schema, (byMaxAge = new Map()));
  let made = byMaxAge.get(defaultMaxAge);
  if (made === undefined) {
    made = instrument(schema, defaultMaxAge);
    made.catch(() => byMaxAge.delete(defaultMaxAge)); // tried again next time
    byMaxAge.set(defaultMaxAge, made);
  }
  return made;
}

async function instrument(original: GraphQLSchema, defaultMaxAge: number): Promise<Instrumented> {
  const graphql = await import('graphql');
  const { ApolloServerPluginCacheControl } = await import('@apollo/server/plugin/cacheControl');
  // A copy with its own type and field objects, in the original's order (see ./schema-copy).
  const schema = copySchema(graphql, original);
  for (const type of Object.values(schema.getTypeMap())) {
    if (!graphql.isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      field.resolve = withFieldHook(field.resolve ?? graphql.defaultFieldResolver);
    }
  }
  const plugin = ApolloServerPluginCacheControl({
    calculateHttpHeaders: false,
    defaultMaxAge,
  }) as unknown as CacheControlPlugin;
  await plugin.serverWillStart?.({ schema });
  return { schema, plugin };
}

function withFieldHook(resolve: GraphQLFieldResolver<unknown, unknown>): GraphQLFieldResolver<unknown, unknown> {
  return (source, args, contextValue, info) => {
    const hook = (contextValue as { [WILL_RESOLVE]?: WillResolveField } | null | undefined)?.[WILL_RESOLVE];
    const done = hook === undefined ? undefined : hook({ source, args, contextValue, info });
    if (typeof done !== 'function') return resolve(source, args, contextValue, info);
    let result: unknown;
    try {
      result = resolve(source, args, contextValue, info);
    } catch (error) {
      done(error);
      throw error;
    }
    whenFinished(result, done);
    return result;
  };
}

/** Calls `done` once `result` (a value, a promise, a list of them) is there, as Apollo's pipeline does. */
function whenFinished(result: unknown, done: (error: unknown, result?: unknown) => void): void {
  if (isPromise(result)) {
    result.then(
      (value) => whenFinished(value, done),
      (error: unknown) => done(error),
    );
  } else if (Array.isArray(result) && result.some(isPromise)) {
    Promise.all(result).then(
      (values) => done(null, values),
      (error: unknown) => done(error),
    );
  } else done(null, result);
}

function isPromise(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

interface Hint {
  readonly maxAge?: number | undefined;
  readonly scope?: 'PUBLIC' | 'PRIVATE' | undefined;
}

/** Apollo's CachePolicy (@apollo/cache-control-types): what the plugin restricts as fields resolve. */
class Policy {
  maxAge: number | undefined;
  scope: 'PUBLIC' | 'PRIVATE' | undefined;

  restrict(hint: Hint): void {
    if (hint.maxAge !== undefined && (this.maxAge === undefined || hint.maxAge < this.maxAge))
      this.maxAge = hint.maxAge;
    if (hint.scope !== undefined && this.scope !== 'PRIVATE') this.scope = hint.scope;
  }

  replace(hint: Hint): void {
    if (hint.maxAge !== undefined) this.maxAge = hint.maxAge;
    if (hint.scope !== undefined) this.scope = hint.scope;
  }

  policyIfCacheable(): { maxAge: number; scope: 'PUBLIC' | 'PRIVATE' } | null {
    if (this.maxAge === undefined || this.maxAge === 0) return null;
    return { maxAge: this.maxAge, scope: this.scope ?? 'PUBLIC' };
  }
}

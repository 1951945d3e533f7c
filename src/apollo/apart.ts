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
import type { DocumentNode, GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import { isThenable } from '../core/errors';
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

/** The request's operation (its context aside: the run gets its own copy). */
export type ApartOperation = Omit<ResponseRequest, 'context'>;

/** What Apollo's own execution is given and a plugin cannot read: the server options of those names. */
export interface ApartExecution {
  readonly rootValue?: unknown;
  readonly fieldResolver?: GraphQLFieldResolver<unknown, unknown> | undefined;
}

/** One plugin's runs apart: its schema copies (one per schema the server runs), its execution options. */
export class ApartRunner {
  readonly #copies = new WeakMap<GraphQLSchema, Promise<Instrumented>>();
  readonly #gateways = new WeakSet<GraphQLSchema>();
  readonly #defaultMaxAge: number;
  readonly #execution: ApartExecution;

  /** defaultMaxAge: the cache-control plugin's (the response layer's). */
  constructor(defaultMaxAge: number, execution: ApartExecution) {
    this.#defaultMaxAge = defaultMaxAge;
    this.#execution = execution;
  }

  /**
   * Makes the copy of a schema the server is about to run (serverWillStart, a gateway's update):
   * before Apollo's first execution wraps the schema's resolvers in place, so the copy's fields
   * without a resolver are still without one and get the server's fieldResolver. Never throws.
   */
  prepare(schema: GraphQLSchema): void {
    this.#instrumented(schema).catch(() => {});
  }

  /**
   * A gateway's API schema (a supergraph's): Apollo executes it through the gateway's query
   * planner, which a plugin cannot call, and the schema itself has no resolvers. Its operations
   * are never run apart (a run would answer nulls): a refresh fails, not stored.
   */
  gateway(schema: GraphQLSchema): void {
    this.#gateways.add(schema);
  }

  /** Whether `schema` is a gateway's API schema (its policy comes from the subgraphs' headers). */
  isGateway(schema: GraphQLSchema): boolean {
    return this.#gateways.has(schema);
  }

  async execute(operation: ApartOperation, context: object): Promise<ExecutedResult & { final: FinalPolicy }> {
    if (this.#gateways.has(operation.schema)) throw new Error('herdcache: a gateway operation is not run apart');
    const graphql = await import('graphql');
    const { schema, plugin } = await this.#instrumented(operation.schema);
    const policy = new Policy();
    const listener = await plugin.requestDidStart?.({ overallCachePolicy: policy });
    const execution = await listener?.executionDidStart?.();
    const willResolveField = execution?.willResolveField;
    // Without the plugin's field hook the policy cannot be known: not cacheable.
    if (willResolveField === undefined) policy.restrict({ maxAge: 0 });
    else (context as { [WILL_RESOLVE]?: WillResolveField })[WILL_RESOLVE] = willResolveField.bind(execution);
    const { rootValue } = this.#execution;
    const result = await graphql.execute({
      schema,
      document: operation.document,
      operationName: operation.operationName,
      variableValues: operation.variables,
      contextValue: context,
      // As Apollo does: a function is called with the document.
      rootValue:
        typeof rootValue === 'function'
          ? (rootValue as (document: DocumentNode) => unknown)(operation.document)
          : rootValue,
    });
    return { data: result.data, errors: result.errors, final: { maxAge: policy.maxAge, scope: policy.scope } };
  }

  #instrumented(schema: GraphQLSchema): Promise<Instrumented> {
    let made = this.#copies.get(schema);
    if (made === undefined) {
      made = this.#instrument(schema);
      made.catch(() => this.#copies.delete(schema)); // tried again next time
      this.#copies.set(schema, made);
    }
    return made;
  }

  async #instrument(original: GraphQLSchema): Promise<Instrumented> {
    const graphql = await import('graphql');
    const { ApolloServerPluginCacheControl } = await import('@apollo/server/plugin/cacheControl');
    // A copy with its own type and field objects, in the original's order (see ./schema-copy).
    const schema = copySchema(graphql, original);
    const fallback = this.#execution.fieldResolver ?? graphql.defaultFieldResolver;
    for (const type of Object.values(schema.getTypeMap())) {
      if (!graphql.isObjectType(type) || type.name.startsWith('__')) continue;
      for (const field of Object.values(type.getFields())) field.resolve = withFieldHook(field.resolve ?? fallback);
    }
    const plugin = ApolloServerPluginCacheControl({
      calculateHttpHeaders: false,
      defaultMaxAge: this.#defaultMaxAge,
    }) as unknown as CacheControlPlugin;
    await plugin.serverWillStart?.({ schema });
    return { schema, plugin };
  }
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
  if (isThenable(result)) {
    result.then(
      (value) => whenFinished(value, done),
      (error: unknown) => done(error),
    );
  } else if (Array.isArray(result) && result.some(isThenable)) {
    Promise.all(result).then(
      (values) => done(null, values),
      (error: unknown) => done(error),
    );
  } else done(null, result);
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

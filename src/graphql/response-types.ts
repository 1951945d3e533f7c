/**
 * The response layer's types: its options, what a plugin hands it and what it answers (see
 * response-cache for the engine that uses them).
 */
import type { DocumentNode, GraphQLSchema } from 'graphql';
import type { NotCacheable, StaticPolicy } from './response-policy';

export interface ResponseCacheOptions<TContext = any> {
  /**
   * The viewer's session, for PRIVATE operations (given the operation's context value): a stable,
   * non-secret id, returned synchronously. A PRIVATE operation without a session is not cached. A
   * throw, a Promise or an object is warned of once (HERDCACHE_SESSION_ID), and that request is
   * executed without the response cache. Default: none.
   */
  sessionId?: (context: TContext) => string | number | bigint | false | null | undefined;
  /**
   * Request parts that vary the answer (a locale header…): become part of the key. A string, an
   * array of strings, or null/undefined for none; anything else, or a throw, is warned of once
   * (HERDCACHE_VARY), and that request is executed without the response cache (`vary_failed`).
   */
  vary?: (context: TContext) => string | readonly string[] | null | undefined;
  /**
   * Whether this request uses the response layer (given the operation's context value), as
   * Envelop's `enabled` and Apollo's `shouldReadFromCache`/`shouldWriteToCache`: `false` executes
   * it without reading, joining or storing a response (`bypassed`, `disabled`): an admin's
   * request, a `Cache-Control: no-cache` one, an operation whose answers are rarely asked twice.
   * Asked for cacheable queries only (a mutation still invalidates). Anything but a boolean, or a
   * throw, is warned of once (HERDCACHE_ENABLED) and bypasses that request (`enabled_failed`).
   * Default: every cacheable query uses it.
   */
  enabled?: (context: TContext) => boolean;
  /** Largest response stored, in bytes of its JSON; larger ones are served, not stored. Default 1 MiB. */
  maxBytes?: number;
  /**
   * maxAge (seconds, at most 1e12) of root and composite fields without a hint, as Apollo's
   * cache-control `defaultMaxAge`. On Apollo, give its cache-control plugin the same value
   * (`ApolloServerPluginCacheControl({ defaultMaxAge })`): see docs/response-cache.md. Default 0.
   */
  defaultMaxAge?: number;
  /** Stale-while-revalidate grace in seconds (at most 1e12) for every response. Default: the smallest @cached(swr:) of its fields, else 0. */
  swr?: number;
  /** A mutation's result entities (`Type:id`) invalidate the responses holding them. Default true. */
  invalidateViaMutation?: boolean;
  /**
   * One-hit wonders: once this many of an operation's responses were stored in a row and none of
   * its responses was read (a hit, a stale hit, a request joining an execution), a miss of it is
   * stored only when its key was asked before among the last few thousand misses left unstored (a
   * second ask), or as 1 in this many, until one is read again (`notStoredReason: 'not_admitted'`:
   * the others are answered to the request that executed them alone; a miss other requests wait
   * on is always stored and shared, a wait being a read). An
   * operation whose answers are each asked once (a page per id, a search) then costs its misses
   * almost nothing more than without the response layer. `false`: every response is stored.
   * Default 32.
   */
  unreadLimit?: number | false;
}

/** What an execution returns, as far as the response layer reads it. */
export interface ExecutedResult {
  readonly data?: unknown;
  readonly errors?: readonly unknown[] | undefined;
}

/**
 * Runs the operation apart from the request that asked for it, with `context` (a copy of the
 * request's context with its own operation state): a background refresh, or the re-execution that
 * answers an invalidated shared execution's waiters. `final` is the policy the execution ended
 * with (the runtime hints included) when the server knows it; otherwise the hints set on
 * `context` with setResponseCacheHint are read.
 */
export type ExecuteApart = (context: object) => Promise<ExecutedResult & { readonly final?: FinalPolicy }>;

/** `oversized`: executed (a miss), served, not stored: its JSON was larger than maxBytes. */
export type ResponseOutcome = 'hit' | 'miss' | 'coalesced' | 'stale' | 'bypassed' | 'oversized';

/**
 * Why an operation was not looked up (`extensions.cache.response` is `bypassed`, with this as
 * `extensions.cache.bypassReason`): the static reasons (see NotCacheable), a PRIVATE operation
 * without a session (`no_session`), variables that cannot be keyed (`unkeyable_variables`: see
 * canonicalArgs), a cache that cannot take it now (`cache_unavailable`: closed, failing), or an
 * option's callback that threw or answered something unusable for this request (`session_failed`:
 * sessionId threw; `vary_failed`: vary threw, or answered no string, array of strings or null;
 * `enabled_failed`: enabled threw or answered no boolean), or `enabled` answered false (`disabled`).
 */
export type ResponseBypassReason =
  | NotCacheable
  | 'no_session'
  | 'unkeyable_variables'
  | 'cache_unavailable'
  | 'session_failed'
  | 'vary_failed'
  | 'disabled'
  | 'enabled_failed';

/**
 * Why an executed result was not stored (`extensions.cache.notStoredReason`, with `response:
 * 'miss'`): it has errors (or no data), a resolver's runtime hint made its policy stricter than
 * its key's (`stricter_hint`: PRIVATE under a PUBLIC key, or maxAge 0; a shorter maxAge is stored), it was delivered incrementally (`incremental`), or it cannot be
 * read or serialized (`unserializable`: JSON.stringify throws on it, a BigInt or a cycle), or a
 * tag it holds was invalidated while it ran (`invalidated`: one re-execution answers the requests
 * that waited on it, and is stored), or it is the result of a request that waited on another's
 * execution whose result could not be shared (`not_shared`: that one had one of the reasons above;
 * this request contended once more, waited on a second such execution, then executed itself, and
 * its result is not stored either), or a @cached field was served stale (its swr grace) while it
 * ran (`stale_fields`: stored fresh for 1 second only, not its maxAge, so the stale value is never
 * passed off as fresh for long; see STALE_FIELDS_MAX_AGE in ./response-cache), or the operation's
 * responses are not read (`not_admitted`: see ResponseCacheOptions.unreadLimit).
 */
export type NotStoredReason =
  | 'errors'
  | 'stricter_hint'
  | 'incremental'
  | 'unserializable'
  | 'invalidated'
  | 'store_unavailable'
  | 'not_shared'
  | 'stale_fields'
  | 'older_fill'
  | 'untagged'
  | 'not_admitted';

/** What became of an executed result handed to complete(). */
export type Completion = 'stored' | 'oversized' | NotStoredReason;

/** What is stored: the data alone (errors are never stored), with the policy it was stored under. */
export interface StoredResponse {
  readonly data: unknown;
  readonly maxAge: number;
  readonly scope: 'PUBLIC' | 'PRIVATE';
  /** Registry clock time when it was computed (for the age). */
  readonly at: number;
}

export interface ResponseRequest {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  readonly operationName: string | null | undefined;
  readonly variables: Record<string, unknown> | null | undefined;
  readonly context: unknown;
  /**
   * Fired when the request's client has gone (Yoga: the request's signal): such a request does not
   * contend again for an execution it would lead, whose result it could not wait for.
   */
  readonly signal?: AbortSignal | undefined;
}

export interface ResponsePlan {
  readonly request: ResponseRequest;
  readonly policy: StaticPolicy;
  readonly key: string;
  /** `sessionId` gave the request a session: its key is a signed-in viewer's (PRIVATE: its own; PUBLIC: shared by signed-in viewers). */
  readonly signedIn: boolean;
}

export interface FinalPolicy {
  readonly maxAge?: number | undefined;
  readonly scope?: 'PUBLIC' | 'PRIVATE' | undefined;
}

export type Lookup =
  | {
      readonly outcome: 'hit' | 'stale' | 'coalesced';
      readonly response: StoredResponse;
      readonly age: number;
      readonly complete?: undefined;
    }
  | {
      readonly outcome: 'miss';
      readonly response?: undefined;
      /** `not_shared`: this request waited on another's execution, whose result could not be shared. */
      readonly notStoredReason?: 'not_shared';
      /** A Completion at once when nothing was left to wait for (a solo run: ./response-solo). */
      complete?(result: ExecutedResult, final?: FinalPolicy): Completion | Promise<Completion>;
    }
  | {
      readonly outcome: 'bypassed';
      readonly bypassReason: ResponseBypassReason;
      readonly response?: undefined;
      readonly complete?: undefined;
    };

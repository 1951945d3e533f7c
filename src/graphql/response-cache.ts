/**
 * The response layer: a whole operation cached as one value, through the registry like any other
 * source, so a response gets what a field gets: one execution however many identical operations
 * arrive together (in the process, and across replicas through the store's fill lock), SWR, tags,
 * the store's failures absorbed. Both server plugins (herdcache/apollo, herdcache/envelop) drive it
 * the same way:
 *
 *   plan(request)      before execution: the static policy, the key; undefined → not cacheable
 *   lookup(plan)       a stored or shared response (answered without executing), or "execute":
 *                      this request runs the operation for everyone waiting on the key, and
 *                      hands its result to complete() when it ends
 *   afterMutation()    a mutation's result entities are invalidated before its response leaves
 *
 * A response is tagged when it ends with its entities (`Type:id`) and the @cached tags of the
 * fields it ran (LateTagged: see core/late-tags), so @invalidates, cache.invalidateTags and a
 * mutation's result entities make it a miss: one invalidation model for fields and responses.
 *
 * Safety rule: a request is only given a response it could have been given from the cache. A
 * PRIVATE operation is keyed by its session; a result whose final policy is stricter than the
 * static one (a resolver's dynamic hint: PRIVATE under a PUBLIC key, or maxAge 0; a shorter maxAge
 * is only stored for that long), or that has errors, is neither stored nor shared: the
 * requests waiting on it execute themselves (and report `not_shared`: UNSHAREABLE). A result too large to
 * store is shared with the requests waiting on it, not stored (LateTagged.served).
 */
import type { Cache } from '../core/cache';
import { LateTagged } from '../core/late-tags';
import {
  type Computation,
  checkTagsSupported,
  fillAbandoned,
  fillCallers,
  flightsStarted,
  nowOf,
  soloFree,
} from '../core/internal';
import { type KnownOperation, ResponseKeys } from './response-key';
import { ResponseComputations } from './response-computations';
import { WaitingContexts } from './response-waiting';
import { START_OVER, type SoloRun, type SoloRuns, soloRunsOf } from './response-solo';
import type { Answer, Shared, Unshared } from './response-shared';
import { IF_INVALIDATED, STRICTER, UNSHAREABLE, toShared } from './response-shared';
import { OutcomeSink } from './response-sink';
import { responseCacheHintOf, restrictPolicy } from './response-hint';
import { type OperationCache, checkCache, operationApart, operationOf } from './request';
import { type StaticPolicy, operationPolicy, staticPolicy } from './response-policy';
import { checkResponseOptions } from './response-options';
import { PART_FAILED, enabledPart, sessionPart, varyPart } from './response-parts';
import { readStaleFields, servedOnlyReason, toStored } from './response-stored';
import { ADMITTED, Admission, type Admits, NOT_ADMITTED } from './response-admission';
import { OnceWarnings } from './warnings';
import { invalidateResultEntities } from './response-mutation';
import type {
  Completion,
  ExecuteApart,
  ExecutedResult,
  FinalPolicy,
  Lookup,
  NotStoredReason,
  ResponseBypassReason,
  ResponseCacheOptions,
  ResponsePlan,
  ResponseRequest,
  StoredResponse,
} from './response-types';

export type * from './response-types';

export { RESPONSE_KEY_HEAD } from './response-key';
export { INCREMENTAL_RESULT, STALE_FIELDS_MAX_AGE } from './response-stored';

export class ResponseEngine {
  readonly #cache: Cache;
  readonly #sessionId: ResponseCacheOptions['sessionId'];
  readonly #vary: ResponseCacheOptions['vary'];
  readonly #enabled: ResponseCacheOptions['enabled'];
  readonly #maxBytes: number;
  /** maxAge (seconds) of fields without a hint (the option). */
  readonly defaultMaxAge: number;
  readonly invalidateViaMutation: boolean;
  readonly #computations: ResponseComputations;
  readonly #keys: ResponseKeys;
  /** The contexts of the requests waiting for each key, lent to its runs apart (./response-waiting). */
  readonly #waiting = new WaitingContexts();
  /** Which misses are stored: not all of an operation whose responses are not read (./response-admission). */
  readonly #admission: Admission;
  /** Misses left unstored, run without a flight of the registry's (./response-solo). */
  readonly #solo: SoloRuns;
  /** The registry clock's time. */
  readonly #now = (): number => nowOf(this.#cache);
  /** One-time warnings about the options' answers at request time (a vary that throws…): this plugin's. */
  readonly warnings = new OnceWarnings();

  /** `owner`: the plugin's name as its errors say it (`herdcachePlugin()`). */
  constructor(cache: Cache, options: true | ResponseCacheOptions, owner: string) {
    checkCache(cache); // before anything reads it: a missing cache is named as the plugin names it
    const { sessionId, vary, enabled, maxBytes, defaultMaxAge, swr, invalidateViaMutation, unreadLimit } =
      checkResponseOptions(options, owner);
    checkTagsSupported(cache, 'responseCache');
    this.#cache = cache;
    this.#sessionId = sessionId;
    this.#vary = vary;
    this.#enabled = enabled;
    this.#maxBytes = maxBytes;
    this.defaultMaxAge = defaultMaxAge;
    this.#keys = new ResponseKeys(defaultMaxAge);
    this.#computations = new ResponseComputations(cache, swr);
    this.invalidateViaMutation = invalidateViaMutation;
    this.#admission = new Admission(unreadLimit);
    this.#solo = soloRunsOf(cache);
  }

  /** The operation's plan, or why it is not cached (not a query, no hint, disabled, no session, unkeyable variables). */
  plan(request: ResponseRequest): ResponsePlan | ResponseBypassReason {
    // A one-operation document (most are) is planned from what was made of it once (KnownOperation).
    const known = this.#keys.known(request);
    const policy =
      known?.policy ?? operationPolicy(request.schema, request.document, request.operationName, this.defaultMaxAge);
    if (typeof policy === 'string') return policy;
    if (this.#enabled !== undefined) {
      const enabled = enabledPart(this.#enabled, request.context, this.warnings);
      if (enabled !== true) return enabled === false ? 'disabled' : 'enabled_failed';
    }
    // PRIVATE: keyed by the session. PUBLIC, given a `sessionId`: keyed by whether the request has
    // one (`true`), as Apollo's response cache keys them (NoSession, AuthenticatedPublic): a
    // signed-in viewer's answer may differ from an anonymous one's (a resolver reading the viewer,
    // a runtime hint), and neither is given the other's.
    let session: string | true | null = null;
    const id = this.#sessionId === undefined ? undefined : sessionPart(this.#sessionId, request.context, this.warnings);
    if (id === PART_FAILED) return 'session_failed';
    if (policy.scope === 'PRIVATE') {
      if (id === undefined) return 'no_session';
      session = id;
    } else if (id !== undefined) session = true;
    const variables = this.#keys.variables(request.variables, policy.variables, known);
    if (variables === undefined) return 'unkeyable_variables';
    const vary = this.#vary === undefined ? null : varyPart(this.#vary, request.context, this.warnings);
    if (vary === PART_FAILED) return 'vary_failed';
    const key =
      known !== undefined && session === null && vary === null
        ? known.head + variables
        : this.#keys.key(request, session, vary, variables);
    const planned: Planned = { request, policy, key, signedIn: session !== null, known };
    return planned;
  }

  /** The operation's static policy (undefined: not a cacheable query), whether or not it has a plan: the HTTP header's. */
  policyOf(request: ResponseRequest): StaticPolicy | undefined {
    return staticPolicy(request.schema, request.document, request.operationName, this.defaultMaxAge);
  }

  /**
   * A response without executing (hit, stale, shared), or "execute" with the function that hands the result
   * back. A waiter of an unshareable execution (a signed-in viewer's, made PRIVATE at run time) contends once
   * more, so its co-waiters share one execution again; after a second such one, it executes itself (`not_shared`).
   */
  lookup(plan: ResponsePlan, executeApart: ExecuteApart): Lookup | Promise<Lookup> {
    return this.#lookup(plan, executeApart, true);
  }

  /** `again`: on an unshareable execution, contend once more (see lookup). A solo run started: at once. */
  #lookup(plan: ResponsePlan, executeApart: ExecuteApart, again: boolean): Lookup | Promise<Lookup> {
    const { policy } = plan;
    const known = (plan as Planned).known; // undefined for a plan not made by plan() (tests)
    let computation = known?.computation;
    if (computation === undefined) {
      try {
        computation = this.#computations.of(policy);
      } catch {
        return BYPASSED_UNAVAILABLE; // the cache cannot take it (closed…): the operation still runs
      }
      if (known !== undefined) known.computation = computation;
    }
    const solo = this.#solo.get(plan.key);
    if (solo !== undefined) return this.#joinSolo(plan, executeApart, again, solo);
    // A miss its operation's admission leaves unstored, with nothing of its key held, runs solo
    // (./response-solo). Decided here when the operation's misses may be left unstored (a hit then
    // reads the store once): the verdict stands at the miss's end; otherwise asked then.
    const admitted = this.#admission.decide(policy, plan.key, known);
    if (admitted === false && soloFree(this.#cache, plan.key))
      return this.#solo.start(plan, computation, (executed, final, startSeq) =>
        this.#toStored(plan, executed, final, operationOf(plan.request.context), startSeq, undefined),
      );
    const admission = admitted === undefined ? this.#admission : admitted ? ADMITTED : NOT_ADMITTED;
    return this.#load(plan, computation, executeApart, again, admission);
  }

  /** #lookup through the registry: `admission`, what decides whether this miss is stored when nobody waits on it (see #lookup). */
  async #load(
    plan: ResponsePlan,
    computation: Computation,
    executeApart: ExecuteApart,
    again: boolean,
    admission: Admits,
  ): Promise<Lookup> {
    let release!: (value: Shared) => void;
    const result = new Promise<Shared>((resolve) => (release = resolve));
    let settleFirst: ((first: First) => void) | undefined; // made when the load's step did not start it (below)
    let fills = 0;
    let answered = false;
    // Called by the registry when this request is the one that computes the key. Two calls run the
    // operation apart, once, for everyone waiting on the key: a call after this request was answered
    // (a stale response served, its refresh due), and a second call (the flight was abandoned by an
    // invalidation while this request executed: its result predates it and is not handed over).
    let run: unknown;
    let startSeq = 0; // the flights started before this request's execution (#toStored's older_fill)
    const fill = (given?: unknown): Promise<Shared | undefined> | undefined => {
      // A stale response's refresh runs with this request's context (its request executes nothing),
      // once; a re-execution after an invalidation never with it: it executed before the
      // invalidation, and what it holds per request (a DataLoader's memo) is what it read then.
      if (answered || ++fills > 1) {
        const context = this.#waiting.lend(plan.key, answered ? plan.request.context : undefined);
        if (context === undefined || (!answered && context === plan.request.context)) return undefined;
        return this.#executeApart(plan, context, executeApart, given);
      }
      run = given;
      startSeq = flightsStarted();
      operationOf(plan.request.context)?.collectTags();
      settleFirst?.(STARTED);
      return result;
    };
    const sink = new OutcomeSink();
    const loaded = this.#cache._load<Answer | undefined>(
      computation.source,
      plan.key,
      fill,
      computation.policy,
      undefined,
      sink,
    );
    // Resolves once the registry has the result (its write issued): a read after the response finds it.
    const complete = (executed: ExecutedResult, final?: FinalPolicy): Promise<Completion> => {
      const operation = operationOf(plan.request.context);
      // Nobody but this request waits on this miss (through any plugin on this cache): it may be
      // left unstored (./response-admission), and counts as one of its operation's unread stores
      // once it is written.
      const alone = (fillCallers(run) ?? 2) <= 1 && !this.#waiting.has(plan.key);
      const stored = this.#toStored(plan, executed, final, operation, startSeq, alone ? admission : undefined);
      const shared = toShared(run, stored);
      release(shared);
      // Invalidated while it ran: not written; a re-execution answers the waiters, not this request
      // (it may not have started: with a store's fill lock, it waits for this execution's lock).
      // Lent to a run apart before it executed: what it holds per request may predate an invalidation.
      if (fills > 1 || fillAbandoned(run) || this.#waiting.lent(plan.request.context))
        return Promise.resolve('invalidated');
      const completion: Completion =
        typeof stored === 'string'
          ? stored
          : stored.servedOnly
            ? servedOnlyReason(stored)
            : readStaleFields(operation) // fresh briefly: a @cached field was served stale (#toStored)
              ? 'stale_fields'
              : 'stored';
      // Refused by the store step: a tag invalidated on another replica meanwhile, or unreadable (see REFUSED).
      // Abandoned by the store step (an invalidation of one of its tags in the few microtasks
      // since the check above): not written, reported so; this request's load then waits for the
      // re-execution (racing a promise of the store step's end instead cost every miss ~30 µs).
      const settled = (): Completion => {
        const result = fillAbandoned(run)
          ? 'invalidated'
          : shared.refused === false
            ? completion
            : REFUSED[shared.refused];
        if (alone && result === 'stored') this.#admission.stored(plan.policy);
        return result;
      };
      return loaded.then(settled, settled);
    };
    // Started in the load's own step (the memory store's misses are): this request executes, no wait.
    if (fills > 0) {
      loaded.then(undefined, ignore); // read by complete(); a close() meanwhile rejects it
      return { outcome: 'miss', complete };
    }
    const first = new Promise<First>((resolve) => (settleFirst = resolve));
    loaded.then(
      (value) => settleFirst!({ value }),
      () => settleFirst!(FAILED),
    );
    // Until answered, this request's context is one a re-execution of the key may run with. A hit
    // answered in the same step (counted already) waits for nothing: no Map write on that path.
    const context = plan.request.context;
    const waits = sink.outcome !== 'hits';
    if (waits) this.#waiting.wait(plan.key, context);
    const firstOutcome = await first;
    if (waits) this.#waiting.end(plan.key, context);
    if (firstOutcome === STARTED) return { outcome: 'miss', complete };
    if (firstOutcome === FAILED) return BYPASSED_UNAVAILABLE; // the cache failed (closed…): execute
    const value = firstOutcome.value;
    // The shared execution's result could not be shared (none left to run it apart): this request executes.
    if (value === undefined) return NOT_SHARED;
    if (value === UNSHAREABLE || value === STRICTER)
      return again && !this.#waiting.lent(plan.request.context) ? this.#again(plan, executeApart, value) : NOT_SHARED;
    answered = true;
    const outcome = sink.outcome === 'hits' ? 'hit' : sink.outcome === 'staleServed' ? 'stale' : 'coalesced';
    return this.#answered(plan, outcome, value);
  }

  /**
   * An unshareable execution's waiter contends once more: not when its client is gone (what it led
   * would be cancelled too), nor when signed in after a stricter runtime hint (each would be too).
   */
  #again(plan: ResponsePlan, executeApart: ExecuteApart, value: Unshared): Promise<Lookup> | Lookup {
    return plan.request.signal?.aborted !== true && (value === UNSHAREABLE || !plan.signedIn)
      ? this.#lookup(plan, executeApart, false)
      : NOT_SHARED;
  }

  /** A response given without executing: a read of its operation (./response-admission). */
  #answered(plan: ResponsePlan, outcome: 'hit' | 'stale' | 'coalesced', value: StoredResponse): Lookup {
    this.#admission.read(plan.policy);
    return { outcome, response: value, age: Math.max(0, Math.floor((this.#now() - value.at) / 1000)) };
  }

  /** Waits for the key's solo run: its result, or (none to share, or an invalidation meanwhile) contends again. */
  async #joinSolo(plan: ResponsePlan, executeApart: ExecuteApart, again: boolean, run: SoloRun): Promise<Lookup> {
    const value = await this.#solo.join(run);
    if (value === START_OVER) return this.#lookup(plan, executeApart, again);
    if (value === UNSHAREABLE || value === STRICTER) return again ? this.#again(plan, executeApart, value) : NOT_SHARED;
    return this.#answered(plan, 'coalesced', value);
  }

  /** Invalidates the entities of a mutation's result, or of one of its payloads (before it leaves). */
  afterMutation(request: ResponseRequest, data: unknown): Promise<void> {
    if (!this.invalidateViaMutation || data === null || data === undefined) return DONE;
    return invalidateResultEntities(this.#cache, request, data, this.warnings);
  }

  /** What to store of a result, or why none (./response-stored); refused as invalidated elsewhere, it is not shared either. */
  #toStored(
    plan: ResponsePlan,
    executed: ExecutedResult,
    final: FinalPolicy | undefined,
    operation: OperationCache | undefined,
    startSeq: number,
    admission: Admits | undefined,
  ): LateTagged<StoredResponse> | NotStoredReason {
    // `admission`: a request's own miss nobody waits on, which may be left unstored
    // (./response-admission); one with waiters, a refresh or a re-execution apart is stored.
    const stored = toStored(plan, executed, final, operation, startSeq, this.#maxBytes, this.#now, admission);
    // Refused by the store step as invalidated on another replica while it ran: the requests that
    // waited on it may have come after that invalidation (a mutation returned): they execute again.
    if (typeof stored !== 'string' && (!stored.servedOnly || stored.tags.length > 0))
      stored.ifInvalidated = IF_INVALIDATED;
    return stored;
  }

  /**
   * Runs the operation apart (see ExecuteApart) on a copy of the request's context with an
   * operation state of its own: its @cached fields' tags are its own, its hints too. Settles with
   * what to store and share, or undefined (not shareable, failed: its waiters execute themselves).
   */
  #executeApart(
    plan: ResponsePlan,
    given: unknown,
    executeApart: ExecuteApart,
    run: unknown,
  ): Promise<Shared | undefined> {
    const context: Record<string | symbol, unknown> =
      given !== null && typeof given === 'object'
        ? Object.assign(Object.create(Object.getPrototypeOf(given)), given)
        : {};
    const operation = operationApart(context, this.#cache);
    operation.collectTags();
    const startSeq = flightsStarted();
    let running: Promise<ExecutedResult & { readonly final?: FinalPolicy }>;
    try {
      running = executeApart(context);
    } catch {
      return Promise.resolve(undefined);
    }
    return running.then(
      (executed) => {
        // The server's final policy (when it knows it), restricted by setResponseCacheHint's.
        const hint = responseCacheHintOf(context);
        const final = hint === undefined ? executed.final : restrictPolicy(executed.final ?? {}, hint);
        return toShared(run, this.#toStored(plan, executed, final, operation, startSeq, undefined));
      },
      () => undefined,
    );
  }
}

/** A plan as plan() makes it: with what is known of its operation (read by #lookup). */
interface Planned extends ResponsePlan {
  readonly known: KnownOperation | undefined;
}

const DONE: Promise<void> = Promise.resolve();
const NOT_SHARED: Lookup = { outcome: 'miss', notStoredReason: 'not_shared' };

const STARTED: unique symbol = Symbol('started');
const BYPASSED_UNAVAILABLE: Lookup = { outcome: 'bypassed', bypassReason: 'cache_unavailable' };
// Why the store step refused a result: a tag invalidated while it ran, unreadable (the store down),
// or larger than the store keeps (a memory store's maxEntrySize, a Redis store's maxValueBytes).
const REFUSED = { invalidated: 'invalidated', unavailable: 'store_unavailable', oversized: 'oversized' } as const;

const FAILED: unique symbol = Symbol('failed');
/** What a lookup learns first (see #lookup). */
type First = typeof STARTED | typeof FAILED | { value: Answer | undefined };

function ignore(): void {}

/**
 * Solo runs: a response-layer miss its admission leaves unstored, executed without a flight of the
 * registry's (./response-cache). Once an operation's responses go unread, most of its misses are
 * not stored (./response-admission); on a store read wholly in the process with no lock (the
 * memory store) and no wrapFill hook (a tracer shows every fill call), such a miss with nothing of
 * its key held (no entry, no flight) runs solo: noted here by key, so a request asking the same
 * response meanwhile waits for it rather than executing it too, and nothing more. No flight, fill
 * call, write step, nor their promises and hops: on a server answering one-off pages (every
 * request a miss), those cost the layer about as much CPU as everything else it does
 * (docs/operations.md, row 9 (b)).
 *
 * A solo run nobody waited on ends with its own request: nothing stored, nothing to fence. One
 * that others waited on is what a flight with waiters is: walked, stored and shared (as is one
 * that read a @cached field served stale: stored fresh for a second, ./response-stored), written
 * before its waiters are answered, unless an invalidation (any: keys, tags, a clear) was applied
 * by the registry since it started. A flight would be abandoned by one of its own tags only; a
 * solo run's are not known until it ends, so any one makes its waiters start over, through the
 * registry: their key is asked a second time by then (the admission stores it), and they share
 * that one execution. Its miss, its fill and its waiters are counted as a flight's would be. The
 * runs are kept per cache: every engine (plugin) on one cache finds the others' runs.
 */
import type { LateTagged } from '../core/late-tags';
import {
  type Computation,
  flightsStarted,
  invalidationsOf,
  nowOf,
  runsApartOf,
  soloCount,
  soloWrite,
} from '../core/internal';
import type { Cache } from '../core/cache';
import { operationOf } from './request';
import { readStaleFields, servedOnlyReason } from './response-stored';
import type {
  Completion,
  ExecutedResult,
  FinalPolicy,
  Lookup,
  NotStoredReason,
  ResponsePlan,
  StoredResponse,
} from './response-types';
import { type Answer, unshared } from './response-shared';

/** A solo run's waiters start over: an invalidation was applied while it ran. */
export const START_OVER: unique symbol = Symbol('herdcache.startOver');

/** What a solo result is to store and share: the stored response's copy, or why none (./response-stored). */
type Share = (
  executed: ExecutedResult,
  final: FinalPolicy | undefined,
  startSeq: number,
) => LateTagged<StoredResponse> | NotStoredReason;

/** One solo execution: the registry's invalidations, flights and clock when it started, its waiters. */
export class SoloRun {
  readonly key: string;
  /** Its response's source and policy (what its miss, fill and waiters are counted on; its write's policy). */
  readonly computation: Computation;
  readonly invalidations: number;
  /** Flights started before it (older_fill: see ./response-stored). */
  readonly startSeq = flightsStarted();
  /** The registry clock when it started: its write's fence (StoreWrite.since). */
  readonly since: number;
  /** performance.now() when it started (its fill's duration, for the onFill hook). */
  readonly started = performance.now();
  /** Requests waiting for it. */
  waiters = 0;
  /** Let go of by its runs (SoloRuns.#forget): no longer the key's. */
  forgotten = false;
  #ended: Promise<Answer | typeof START_OVER> | undefined;
  #end: ((answer: Answer | typeof START_OVER) => void) | undefined;

  constructor(cache: Cache, key: string, computation: Computation) {
    this.key = key;
    this.computation = computation;
    this.invalidations = invalidationsOf(cache);
    this.since = nowOf(cache);
  }

  /** Waits for its end: the response to share, why none, or START_OVER. */
  wait(): Promise<Answer | typeof START_OVER> {
    this.waiters++;
    return (this.#ended ??= new Promise((resolve) => (this.#end = resolve)));
  }

  /** Ends it: `answer` to its waiters. */
  end(answer: Answer | typeof START_OVER): void {
    this.#end?.(answer);
  }
}

/** The solo runs of one cache, by response key. */
export class SoloRuns {
  readonly #cache: Cache;
  /** Key → its run. Renewed now and then (see #forget): a Map emptied entry by entry churns its tables. */
  #runs = new Map<string, SoloRun>();
  /** Runs ended since the Map was last renewed. */
  #ended = 0;

  constructor(cache: Cache) {
    this.#cache = cache;
  }

  /** The key's run in progress. */
  get(key: string): SoloRun | undefined {
    return this.#runs.get(key);
  }

  /** Runs in progress (leak checks). */
  get size(): number {
    return this.#runs.size;
  }

  /**
   * Starts the plan's run (its miss counted on `computation`'s source): its request executes, and
   * hands its result to `complete`, which stores and shares `share(…)` when others waited (see end).
   */
  start(plan: ResponsePlan, computation: Computation, share: Share): Lookup {
    const run = new SoloRun(this.#cache, plan.key, computation);
    this.#runs.set(plan.key, run);
    soloCount(this.#cache, computation, 'misses', plan.key);
    // Its @cached fields' tags are noted, as an execution's that may be stored (it may: see end).
    const operation = operationOf(plan.request.context);
    operation?.collectTags();
    const complete = (executed: ExecutedResult, final?: FinalPolicy): Completion =>
      this.#end(run, readStaleFields(operation), () => share(executed, final, run.startSeq));
    return { outcome: 'miss', complete };
  }

  /** A request waits for the key's run (counted as coalesced). */
  join(run: SoloRun): Promise<Answer | typeof START_OVER> {
    soloCount(this.#cache, run.computation, 'coalesced', run.key);
    return run.wait();
  }

  /**
   * Ends the key's run. Nobody waited, no stale field read: nothing stored. Otherwise, unless an
   * invalidation came while it ran (its waiters start over), `share()` is written and handed to
   * its waiters (or why none). The completion its request reports.
   */
  #end(run: SoloRun, staleFields: boolean, share: () => LateTagged<StoredResponse> | NotStoredReason): Completion {
    const { key, computation } = run;
    this.#forget(run);
    soloCount(this.#cache, computation, 'fills', key, performance.now() - run.started);
    if (run.waiters === 0 && !staleFields) return 'not_admitted';
    if (invalidationsOf(this.#cache) !== run.invalidations) {
      run.end(START_OVER);
      return 'invalidated';
    }
    const shared = share();
    if (typeof shared === 'string') {
      run.end(unshared(shared));
      return shared;
    }
    // Written before its waiters are answered: what they do next reaches the store after it.
    const completion: Completion = shared.servedOnly
      ? servedOnlyReason(shared)
      : !soloWrite(this.#cache, computation, key, shared, run.since)
        ? 'oversized'
        : staleFields
          ? 'stale_fields'
          : 'stored';
    run.end(shared.value);
    return completion;
  }

  /**
   * Lets go of the key's entry. The Map is renewed after every SWEEP_AFTER runs (it holds the few
   * in progress): V8 links each table a churning Map discards to its successor, and one in the old
   * generation kept every later table alive through each young collection (see FlightTable).
   */
  #forget(run: SoloRun): void {
    if (run.forgotten) return;
    run.forgotten = true;
    const runs = this.#runs;
    runs.delete(run.key); // its own: a run for its key starts only once it is forgotten
    if (++this.#ended < SWEEP_AFTER) return;
    this.#runs = new Map(runs);
    this.#ended = 0;
  }
}

/** Runs ended before the Map is renewed (see SoloRuns.#forget). */
const SWEEP_AFTER = 1024;

/** The solo runs of `cache`, shared by every engine on it; counted in cache.inFlight, as fills are. */
export function soloRunsOf(cache: Cache): SoloRuns {
  return runsApartOf(cache, () => new SoloRuns(cache));
}

/**
 * One call of a source's function (a loader's batch, a getOrCompute fill) as the miss pipeline
 * makes it: failures become per-key Failures (never a rejection), and the call is shown to the
 * wrapFill hook (tracing) without the hook being able to change or break it.
 */
import { FillRun, type FillSignal } from './fill-run';
import { isError } from './errors';
import { Failure, asError } from './flight';
import type { Item, LockOutcome, Source } from './item';
import type { BatchContext, CacheHooks, Fill, FillContext, FillInfo } from './types';

/** One call of the source's function; a throw fails every key of the call. Never rejects. */
export async function runGroup(source: Source, items: Item[], run: FillSignal): Promise<unknown[]> {
  try {
    return await source.run(items, run);
  } catch (thrown) {
    const failure = new Failure(asError(thrown));
    return items.map(() => failure);
  }
}

/** Callers waiting on the items' flights. */
export function callersOf(items: readonly Item[]): number {
  let n = 0;
  for (const item of items) n += item.flight.waiters;
  return n;
}

/**
 * A fill call as the wrapFill hook sees it (FillInfo): its own enumerable fields are FillInfo's
 * (`callers` and `signal` are read when asked: getters); the call itself is kept apart.
 */
export class WrappedFill implements FillInfo {
  readonly source: string;
  readonly keys: readonly string[];
  readonly background: boolean;
  failures = 0;
  readonly lock: LockOutcome;
  readonly #source: Source;
  readonly #items: Item[];
  readonly #run: FillSignal;
  #call: Promise<unknown[]> | undefined;

  constructor(source: Source, items: Item[], run: FillSignal, lock: LockOutcome) {
    this.source = source.name;
    this.keys = items.map((item) => item.key);
    this.background = items.every((item) => item.flight.background);
    this.lock = lock;
    this.#source = source;
    this.#items = items;
    this.#run = run;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  get callers(): number {
    return callersOf(this.#items);
  }

  /** The call, started once whoever asks first (the wrapper, or the pipeline when the wrapper did not). */
  readonly #start = (): Promise<unknown[]> =>
    (this.#call ??= runGroup(this.#source, this.#items, this.#run).then((results) => {
      for (const result of results) if (result instanceof Failure) this.failures++;
      return results;
    }));

  /** Runs the call through the wrapFill hook: the results are the call's own, whatever the hook does. */
  static wrapped(wrap: NonNullable<CacheHooks['wrapFill']>, fill: WrappedFill): Promise<unknown[]> {
    try {
      const out = wrap(fill.#start, fill);
      if (out !== null && typeof out === 'object' && typeof (out as Promise<unknown>).then === 'function')
        (out as Promise<unknown>).then(undefined, ignore);
    } catch {
      // Observers never break loads.
    }
    return fill.#start();
  }
}

function ignore(): void {}

export async function runFill(item: Item, run: FillSignal): Promise<unknown[]> {
  try {
    const value = await (item.arg as Fill<unknown>)(new RunFillContext(item.key, run));
    // A returned Error is a failed fill, as a thrown one (and as an Error in a loader's batch
    // result, and a resolver's returned Error under @cached): never cached, its callers get it.
    return [isError(value) ? new Failure(value) : value];
  } catch (thrown) {
    return [new Failure(asError(thrown))];
  }
}

/**
 * A batch function's context: its signal made when read (a getter on the prototype, as an object
 * literal with a getter is built by a slow runtime path in V8, ~7 µs per fill under load).
 */
export class RunBatchContext implements BatchContext {
  readonly #run: FillSignal;
  constructor(run: FillSignal) {
    this.#run = run;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  /**
   * Whether a tag of `tags` (any, with `anyTag`) was invalidated while the late-tagged fill given
   * `context` ran: its flights are then abandoned (FillRun.lateCheck).
   */
  static invalidatedLate(context: unknown, tags: readonly string[], anyTag: boolean): boolean {
    if (!(context instanceof RunBatchContext)) return false;
    const run = context.#run;
    return run instanceof FillRun && run.lateCheck !== undefined && run.lateCheck(tags, anyTag);
  }

  /** The callers waiting on the late-tagged fill given `context` (undefined: not known). */
  static callers(context: unknown): number | undefined {
    if (!(context instanceof RunBatchContext)) return undefined;
    const run = context.#run;
    return run instanceof FillRun ? run.callers?.() : undefined;
  }

  /** Whether `context` is a fill's context whose run was abandoned (see FillRun.abandoned). */
  static abandoned(context: unknown): boolean {
    if (!(context instanceof RunBatchContext)) return false;
    const run = context.#run;
    return run instanceof FillRun && run.abandoned;
  }
}

/** A getOrCompute fill's context: the batch context and its key. */
class RunFillContext extends RunBatchContext implements FillContext {
  constructor(
    readonly key: string,
    run: FillSignal,
  ) {
    super(run);
  }
}

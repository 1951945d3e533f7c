/**
 * When a batch leaves. By default DataLoader's moment: after the promise jobs queued now have
 * run, then on the next tick, so every resolver of the current execution phase enqueues its keys
 * before the batch leaves. A loader may bring its own `batchScheduleFn` (a time window, a manual
 * dispatch), exactly as DataLoader's option of that name.
 */
import { invalidOption } from './errors';
import { onRejection } from './hooks';

/** Given the batch's dispatch, calls it once, "in the immediate future". */
export type BatchScheduleFn = (dispatch: () => void) => void;

const resolved = Promise.resolve();

export const afterPromiseJobs: BatchScheduleFn = (dispatch) => {
  void resolved.then(() => process.nextTick(dispatch));
};

export function checkBatchScheduleFn(value: unknown): BatchScheduleFn | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function')
    throw invalidOption(
      'batchScheduleFn',
      value,
      'a function (dispatch) => void that calls dispatch once, e.g. (dispatch) => setTimeout(dispatch, 5)',
    );
  return value as BatchScheduleFn;
}

/**
 * Runs `schedule(dispatch)` so that `dispatch` runs exactly once: a scheduler that throws (or an
 * async one that rejects) falls back to the default moment (the cache never leaves a load hanging on its own account), one
 * that calls back twice dispatches once.
 */
export function scheduleOnce(schedule: BatchScheduleFn, dispatch: () => void): void {
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    dispatch();
  };
  try {
    // An async scheduler that rejects is as one that throws (its rejection observed: else fatal under Node's default).
    onRejection(schedule(once), () => afterPromiseJobs(once));
  } catch {
    afterPromiseJobs(once);
  }
}

/**
 * Items waiting for their batch to leave: those of sources on the default schedule all together at
 * the default moment, those of a source with its own batchScheduleFn when its window says so.
 */
export class DispatchQueue<S extends { readonly schedule?: BatchScheduleFn }, T extends { readonly source: S }> {
  /** Items queued for the next dispatch, from every source on the default schedule. */
  #queued: T[] = [];
  /** Items of sources with their own batchScheduleFn, each waiting for its own dispatch. */
  readonly #windows = new Map<S, T[]>();
  readonly #dispatch: (items: T[]) => void;

  constructor(dispatch: (items: T[]) => void) {
    this.#dispatch = dispatch;
  }

  enqueue(item: T): void {
    const schedule = item.source.schedule;
    if (schedule !== undefined) {
      // The source's own window (batchScheduleFn): its keys leave together when it says so.
      const source = item.source;
      const window = this.#windows.get(source);
      if (window !== undefined) {
        window.push(item);
        return;
      }
      const items: T[] = [item]; // queued before scheduling: a scheduler may call back at once
      this.#windows.set(source, items);
      scheduleOnce(schedule, () => {
        if (this.#windows.get(source) === items) this.#windows.delete(source);
        this.#dispatch(items);
      });
      return;
    }
    this.#queued.push(item);
    if (this.#queued.length === 1) afterPromiseJobs(this.#dispatchQueued);
  }

  readonly #dispatchQueued = (): void => {
    const queued = this.#queued;
    this.#queued = [];
    this.#dispatch(queued);
  };
}

/** Resolves on the event loop's next turn (after the microtasks and I/O callbacks of this one). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * When a batch leaves. By default DataLoader's moment: after the promise jobs queued now have
 * run, then on the next tick, so every resolver of the current execution phase enqueues its keys
 * before the batch leaves. A loader may bring its own `batchScheduleFn` (a time window, a manual
 * dispatch), exactly as DataLoader's option of that name.
 */
import { invalidOption } from './errors';

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
 * Runs `schedule(dispatch)` so that `dispatch` runs exactly once: a scheduler that throws falls
 * back to the default moment (the cache never leaves a load hanging on its own account), one
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
    schedule(once);
  } catch {
    afterPromiseJobs(once);
  }
}

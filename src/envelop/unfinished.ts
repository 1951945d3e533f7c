/**
 * The response layer's executions a Yoga request started and has not handed over yet. The request
 * that executes for a key hands its result to the engine in useHerdcache's onExecuteDone (or in
 * the catch of its execute wrapper); until then every request waiting on the key waits. Two things
 * outside herdcache skip both: a plugin listed before it whose onExecuteDone throws (Envelop stops
 * the chain), and one listed after it that replaces the execute function with one that throws.
 * The key then stayed in flight for good. Yoga's onResponse runs for every response, a 500 too: an
 * execution not handed over by then is handed over as failed, so its waiters contend again.
 */
import type { Completion, ExecutedResult, FinalPolicy } from '../graphql/response-cache';
import { requestOf } from './cache-control';

type Complete = (executed: ExecutedResult, final?: FinalPolicy) => Promise<Completion>;

/** What an execution not handed over is handed over as: a failed result (neither stored nor shared). */
const NEVER_HANDED_OVER: ExecutedResult = {
  errors: [new Error('herdcache: the execution ended without handing its result to the response layer')],
};

export class Unfinished {
  readonly #byRequest = new WeakMap<object, Set<() => void>>();

  /** `complete`, made to run once, and tracked under the HTTP request of `context` until it has. */
  track(context: unknown, complete: Complete): Complete {
    let done: Promise<Completion> | undefined;
    const once: Complete = (executed, final) => (done ??= complete(executed, final));
    const request = requestOf(context);
    if (request === undefined) return once; // not Yoga: no onResponse to hand it over
    let pending = this.#byRequest.get(request);
    if (pending === undefined) this.#byRequest.set(request, (pending = new Set()));
    const abandon = () => void once(NEVER_HANDED_OVER).catch(() => {});
    pending.add(abandon);
    return (executed, final) => {
      pending.delete(abandon);
      return once(executed, final);
    };
  }

  /** The request's response is leaving: what it never handed over is handed over as failed. */
  end(request: object): void {
    const pending = this.#byRequest.get(request);
    if (pending === undefined) return;
    this.#byRequest.delete(request);
    for (const abandon of pending) abandon();
  }
}

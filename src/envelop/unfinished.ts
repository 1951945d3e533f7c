/**
 * The response layer's executions a Yoga request started and has not handed over yet. The request
 * that executes for a key hands its result to the engine in useHerdcache's onExecuteDone (or in
 * the catch of its execute wrapper); until then every request waiting on the key waits. Two things
 * outside herdcache skip both: a plugin listed before it whose onExecuteDone throws (Envelop stops
 * the chain), and one listed after it that replaces the execute function with one that throws.
 * The key then stayed in flight for good. So an execution not handed over when its operation's
 * handling ends (useHerdcache wraps Yoga's params handler: once per operation, a batch's each, an
 * error turned into a result too, whatever another plugin's hooks throw) is handed over as failed
 * then, and its waiters contend again; Yoga's onResponse does the same for the whole HTTP request,
 * last. The operation's own end matters for a batch: its response leaves only once every operation
 * of it has its result, and another operation of the same batch may be waiting on this one's key.
 */
import type { Completion, ExecutedResult, FinalPolicy } from '../graphql/response-cache';
import { requestOf } from './cache-control';

/** What the engine's lookup gave to hand a result over with (a Completion at once, or later). */
type Complete = (executed: ExecutedResult, final?: FinalPolicy) => Completion | Promise<Completion>;
/** The same, handed over once: always a promise (what a second call, and `abandon`, wait on). */
type Once = (executed: ExecutedResult, final?: FinalPolicy) => Promise<Completion>;

/** What an execution not handed over is handed over as: a failed result (neither stored nor shared). */
const NEVER_HANDED_OVER: ExecutedResult = {
  errors: [new Error('herdcache: the execution ended without handing its result to the response layer')],
};

export class Unfinished {
  /** By operation context, and by HTTP request: the hand-overs as failed of what each has pending. */
  readonly #pending = new WeakMap<object, Set<() => void>>();

  /**
   * `complete`, made to run once, and tracked under the operation's context and its HTTP request
   * until it has.
   */
  track(context: unknown, complete: Complete): Once {
    let done: Promise<Completion> | undefined;
    const once: Once = (executed, final) => (done ??= Promise.resolve(complete(executed, final)));
    const request = requestOf(context);
    if (request === undefined) return once; // not Yoga: no hook to hand it over
    const abandon = () => void once(NEVER_HANDED_OVER).catch(() => {});
    const sets = [this.#setOf(request)];
    if (context !== request) sets.push(this.#setOf(context as object));
    for (const set of sets) set.add(abandon);
    return (executed, final) => {
      for (const set of sets) set.delete(abandon);
      return once(executed, final);
    };
  }

  /** The operation's handling ended, or the request's response is leaving: what it never handed over is handed over as failed. */
  end(key: object): void {
    const pending = this.#pending.get(key);
    if (pending === undefined) return;
    this.#pending.delete(key);
    for (const abandon of pending) abandon();
  }

  #setOf(key: object): Set<() => void> {
    let set = this.#pending.get(key);
    if (set === undefined) this.#pending.set(key, (set = new Set()));
    return set;
  }
}

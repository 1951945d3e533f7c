/**
 * A request's memo of answers: the same key gives the same answer for the rest of the request.
 * What it holds per key (an entry answered synchronously, a load's promise, or a load shared by
 * callers with signals), how a held answer is read (as a value when it is known), and how a load
 * is memoized. Used by the scoped loaders and by the request scope's getOrCompute and @cached.
 */
import type { Entry } from './freshness';
import { PENDING_OR_UNKNOWN, Rejection, fulfilled, outcomeOf, raceAbort } from './flight';
import { batchFailures } from './loader';

/**
 * One memoized load of a request whose first caller came with a signal. Each caller may leave
 * with its own signal without disturbing the others; the registry is told to stop waiting only
 * when every caller that came with a signal has left and none came without one. (A load whose
 * first caller had no signal is memoized as its promise: nothing can abandon it.)
 */
export class Shared<V> {
  readonly promise: Promise<V>;
  readonly #controller = new AbortController();
  /** A caller without a signal wants the value to the end. */
  #pinned = false;
  /** Callers with a signal still waiting. */
  #waiting = 0;

  constructor(start: (signal: AbortSignal | undefined) => Promise<V>) {
    this.promise = start(this.#controller.signal);
  }

  /** Every caller with a signal left before the value came: the registry load was abandoned. */
  get abandoned(): boolean {
    return this.#controller.signal.aborted;
  }

  join(signal: AbortSignal | undefined): Promise<V> {
    if (signal === undefined) {
      this.#pinned = true;
      return this.promise; // the same promise for every such caller, as DataLoader
    }
    if (signal.aborted) return Promise.reject(signal.reason);
    this.#waiting++;
    return raceAbort(this.promise, signal, () => {
      if (--this.#waiting === 0 && !this.#pinned) this.#controller.abort(signal.reason);
    });
  }
}

/**
 * What a request remembers for a key: the entry it was answered from synchronously (or a primed
 * value), the promise of a load whose first caller had no signal, or a Shared load.
 */
export type Held<V> = Entry<V> | Promise<V> | Shared<V>;

/** Nothing held for the key: the caller goes to the registry. */
export const NOTHING: unique symbol = Symbol('herdcache.nothing');

/**
 * The request's answer for `key` if it has one. `sync`: a value when it is known (a synchronous
 * hit, a prime, a load that has settled), else a promise; otherwise always a promise. A held load
 * that failed in a way `forget` accepts is dropped here, when next looked at, rather than by a
 * handler per load: the next caller retries.
 */
export function held<V>(
  memo: Map<string, Held<V>>,
  key: string,
  signal: AbortSignal | undefined,
  forget: (error: unknown) => boolean,
  sync: boolean,
): V | Promise<V> | typeof NOTHING {
  const answer = memo.get(key);
  if (answer === undefined) return NOTHING;
  if (answer instanceof Shared) return answer.join(signal);
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (answer instanceof Promise) {
    const outcome = outcomeOf(answer);
    if (outcome instanceof Rejection) {
      if (forget(outcome.error)) {
        memo.delete(key);
        return NOTHING;
      }
    } else if (sync && outcome !== PENDING_OR_UNKNOWN) {
      return outcome as V;
    }
    return signal === undefined ? answer : raceAbort(answer, signal, ignore);
  }
  return sync ? answer.value : fulfilled(answer);
}

export function ignore(): void {}

/** Memoizes the registry load `start` under `key` for the request, or joins the one it holds. */
export function memoized<V>(
  memo: Map<string, Held<V>>,
  key: string,
  signal: AbortSignal | undefined,
  start: (signal: AbortSignal | undefined) => Promise<V>,
  forget: (error: unknown) => boolean,
): Promise<V> {
  const answer = held(memo, key, signal, forget, false);
  if (answer !== NOTHING) return answer as Promise<V>;
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (signal === undefined) {
    const promise = start(undefined);
    memo.set(key, promise);
    return promise;
  }
  const shared = new Shared(start);
  memo.set(key, shared);
  shared.promise.catch((error: unknown) => {
    if ((shared.abandoned || forget(error)) && memo.get(key) === shared) memo.delete(key);
  });
  return shared.join(signal);
}

/** Per-key Errors returned by a batch stay memoized (DataLoader); anything else is forgotten. */
export function forgetUnlessKeyError(error: unknown): boolean {
  return !(error instanceof Error) || batchFailures.has(error);
}

export const forgetAlways = () => true;

/** MemoKeys made so far: each gets the next number (exact in a double up to 2^53). */
let memoKeys = 0;

/**
 * @internal A key reused across requests (a @cached field's key, per parent identity), numbered
 * once, so a request can remember its synchronous answer for it in a SlotMemo instead of a Map.
 */
export class MemoKey {
  readonly id = ++memoKeys;
  constructor(readonly key: string) {}
}

/**
 * @internal A request's synchronous answers by MemoKey: open addressing on the key's number, in
 * plain arrays, so remembering a warm field's answer hashes no string and grows no Map (a Map per
 * request cost a warm @cached field about as much as the rest of its hit path). Never shrinks,
 * lives as long as its request.
 */
export class SlotMemo {
  /** Key at 2i, its answer at 2i + 1: one array to allocate and grow. */
  #table: (MemoKey | Entry | undefined)[] = new Array<MemoKey | Entry | undefined>(2 * SLOTS).fill(undefined);
  #mask = SLOTS - 1;
  #size = 0;

  get(memoKey: MemoKey): Entry | undefined {
    const table = this.#table;
    const mask = this.#mask;
    for (let i = memoKey.id & mask; ; i = (i + 1) & mask) {
      const at = table[2 * i];
      if (at === memoKey) return table[2 * i + 1] as Entry;
      if (at === undefined) return undefined;
    }
  }

  /** Remembers `entry` for a key not held yet (get returned undefined). */
  set(memoKey: MemoKey, entry: Entry): void {
    // Grown fourfold at 3/4 full: probes stay short, and a request of 100 warm fields grows it once.
    if (4 * (this.#size + 1) > 3 * (this.#mask + 1)) this.#grow();
    this.#insert(memoKey, entry);
    this.#size++;
  }

  #insert(memoKey: MemoKey, entry: Entry | undefined): void {
    const table = this.#table;
    const mask = this.#mask;
    let i = memoKey.id & mask;
    while (table[2 * i] !== undefined) i = (i + 1) & mask;
    table[2 * i] = memoKey;
    table[2 * i + 1] = entry;
  }

  #grow(): void {
    const table = this.#table;
    const slots = 4 * (this.#mask + 1);
    this.#table = new Array<MemoKey | Entry | undefined>(2 * slots).fill(undefined);
    this.#mask = slots - 1;
    for (let i = 0; i < table.length; i += 2) {
      const memoKey = table[i] as MemoKey | undefined;
      if (memoKey !== undefined) this.#insert(memoKey, table[i + 1] as Entry);
    }
  }
}

/** A SlotMemo's first size (a power of two). */
const SLOTS = 64;

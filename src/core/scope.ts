/**
 * The per-request view. Within one operation the same key gives the same answer (the memo
 * holds the first promise), even if the shared entry is refreshed mid-request; underneath,
 * loads go through the registry, so concurrent requests still share fills and batches.
 *
 * `load`, `loadMany`, `prime`, `clear` and `clearAll` of a scoped loader behave as DataLoader
 * documents: prime keeps an existing entry, clear forgets the request's memo only, a key that
 * failed inside a batch result stays failed for the request, and a whole-batch failure is
 * forgotten so the next load retries.
 */
import type { Entry } from './freshness';
import { PENDING_OR_UNKNOWN, Rejection, fulfilled, outcomeOf, raceAbort } from './flight';
import { type Loader, batchFailures, loadEach } from './loader';
import { checkSignal } from './options';
import { CounterSet, type CounterName, type Sink } from './metrics';
import { type Computation, NO_ARG, type Registry } from './registry';
import type { Fill, GetOrComputeOptions, LoadOptions, MetricsSnapshot } from './types';

/**
 * One memoized load of a request whose first caller came with a signal. Each caller may leave
 * with its own signal without disturbing the others; the registry is told to stop waiting only
 * when every caller that came with a signal has left and none came without one. (A load whose
 * first caller had no signal is memoized as its promise: nothing can abandon it.)
 */
class Shared<V> {
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
type Held<V> = Entry<V> | Promise<V> | Shared<V>;

/** Nothing held for the key: the caller goes to the registry. */
const NOTHING: unique symbol = Symbol('herdcache.nothing');

/**
 * The request's answer for `key` if it has one. `sync`: a value when it is known (a synchronous
 * hit, a prime, a load that has settled), else a promise; otherwise always a promise. A held load
 * that failed in a way `forget` accepts is dropped here, when next looked at, rather than by a
 * handler per load: the next caller retries.
 */
function held<V>(memo: Map<string, Held<V>>, key: string, signal: AbortSignal | undefined, forget: (error: unknown) => boolean, sync: boolean): V | Promise<V> | typeof NOTHING {
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

function ignore(): void {}

/** Memoizes the registry load `start` under `key` for the request, or joins the one it holds. */
function memoized<V>(memo: Map<string, Held<V>>, key: string, signal: AbortSignal | undefined, start: (signal: AbortSignal | undefined) => Promise<V>, forget: (error: unknown) => boolean): Promise<V> {
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
function forgetUnlessKeyError(error: unknown): boolean {
  return !(error instanceof Error) || batchFailures.has(error);
}

const forgetAlways = () => true;

export class ScopedLoader<K, V> {
  readonly #loader: Loader<K, V>;
  readonly #scope: RequestScope;
  readonly #memo = new Map<string, Held<V>>();

  /** @internal use scope.loader(loader) */
  constructor(loader: Loader<K, V>, scope: RequestScope) {
    this.#loader = loader;
    this.#scope = scope;
  }

  get name(): string {
    return this.#loader.name;
  }

  load(key: K, options?: LoadOptions): Promise<V> {
    let storeKey: string;
    try {
      storeKey = this.#loader.storeKey(key);
      checkSignal(options);
    } catch (error) {
      return Promise.reject(error);
    }
    return memoized(this.#memo, storeKey, options?.signal, (signal) => this.#loader._load(key, signal, this.#scope), forgetUnlessKeyError);
  }

  /**
   * load() for resolvers that may return a value: the value itself when this request already
   * has it or the store holds it fresh in process (the memory store, a tiered store's L1), so
   * graphql-js completes the field without a promise; otherwise load()'s promise. Counted as
   * load() is, and the same answer within the request.
   */
  read(key: K): V | Promise<V> {
    let storeKey: string;
    try {
      storeKey = this.#loader.storeKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    const memo = this.#memo;
    const answer = held(memo, storeKey, undefined, forgetUnlessKeyError, true);
    if (answer !== NOTHING) return answer;
    const entry = this.#loader._peek(storeKey, key, this.#scope);
    if (entry !== undefined) {
      memo.set(storeKey, entry as Entry<V>);
      return entry.value as V;
    }
    return memoized(memo, storeKey, undefined, (signal) => this.#loader._load(key, signal, this.#scope), forgetUnlessKeyError);
  }

  loadMany(keys: readonly K[], options?: LoadOptions): Promise<(V | Error)[]> {
    return loadEach(keys, (key) => this.load(key, options));
  }

  /** Request-local: keeps an existing entry, as DataLoader's prime. An Error primes a rejection. */
  prime(key: K, value: V | Error): this {
    const storeKey = this.#loader.storeKey(key);
    if (held(this.#memo, storeKey, undefined, forgetUnlessKeyError, false) === NOTHING) this.#memo.set(storeKey, primed(value));
    return this;
  }

  /** Request-local: forgets the memo for `key` (use loader.clear to invalidate the shared cache). */
  clear(key: K): this {
    this.#memo.delete(this.#loader.storeKey(key));
    return this;
  }

  clearAll(): this {
    this.#memo.clear();
    return this;
  }
}

/** What prime() holds: a value as an entry that never goes stale; an Error as a rejection. */
function primed<V>(value: V | Error): Held<V> {
  if (!(value instanceof Error)) return { value, freshUntil: Infinity, staleUntil: Infinity };
  const promise = Promise.reject(value);
  promise.catch(ignore);
  return promise;
}

export class RequestScope implements Sink {
  readonly #registry: Registry;
  // Made on first use: a request that never touches one of them pays nothing for it.
  #loaders: Map<Loader<unknown, unknown>, ScopedLoader<unknown, unknown>> | undefined;
  #computed: Map<string, Held<unknown>> | undefined;
  #stats: CounterSet | undefined;

  /** @internal use cache.request() */
  constructor(registry: Registry) {
    this.#registry = registry;
  }

  /** The request's view of a registry loader, created on first use. */
  loader<K, V>(loader: Loader<K, V>): ScopedLoader<K, V> {
    const loaders = (this.#loaders ??= new Map());
    let scoped = loaders.get(loader as Loader<unknown, unknown>);
    if (scoped === undefined) {
      scoped = new ScopedLoader(loader as Loader<unknown, unknown>, this);
      loaders.set(loader as Loader<unknown, unknown>, scoped);
    }
    return scoped as ScopedLoader<K, V>;
  }

  load<K, V>(loader: Loader<K, V>, key: K, options?: LoadOptions): Promise<V> {
    return this.loader(loader).load(key, options);
  }

  /** getOrCompute, memoized for this request and attributed to its stats. Failures are not memoized. */
  getOrCompute<V>(key: string, fill: Fill<V>, options?: GetOrComputeOptions): Promise<V> {
    try {
      checkSignal(options);
    } catch (error) {
      return Promise.reject(error);
    }
    const computed = (this.#computed ??= new Map()) as Map<string, Held<V>>;
    return memoized(computed, key, options?.signal, (signal) => this.#registry._getOrCompute<V>(key, fill, options && { ...options, signal }, this), forgetAlways);
  }

  /**
   * @internal The @cached directive's hit path: this request's earlier answer for `key`, or the
   * value of a fresh entry held in process; NOTHING otherwise (the directive then makes its fill
   * and calls _compute). Nothing is allocated for a field until it must be.
   */
  _read(computation: Computation, key: string): unknown {
    const computed = this.#computed;
    if (computed !== undefined) {
      const answer = held(computed, key, undefined, forgetAlways, true);
      if (answer !== NOTHING) return answer;
    }
    const entry = this.#registry._peek(computation.source, key, NO_ARG, computation.policy, this);
    if (entry === undefined) return NOTHING;
    (this.#computed ??= new Map()).set(key, entry);
    return entry.value;
  }

  /** @internal The directive's miss: getOrCompute with its computation resolved at build time. */
  _compute<V>(computation: Computation, key: string, fill: Fill<V>): Promise<V> {
    const computed = (this.#computed ??= new Map()) as Map<string, Held<V>>;
    return memoized(computed, key, undefined, () => this.#registry._load<V>(computation.source, key, fill, computation.policy, undefined, this), forgetAlways);
  }

  /** What this request's loads did: hits, misses, coalesced, fills… per source. */
  stats(): MetricsSnapshot {
    return (this.#stats ??= new CounterSet()).snapshot();
  }

  /** @internal Sink */
  count(source: string, counter: CounterName, n: number): void {
    (this.#stats ??= new CounterSet()).count(source, counter, n);
  }
}

/** What RequestScope._read returns when it has no answer without a load. */
export { NOTHING as NO_ANSWER };

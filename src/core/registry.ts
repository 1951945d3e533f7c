/**
 * What loaders and request scopes need from the registry: a small interface, so they depend on
 * it and not on the Cache class (which creates them). Members are internal (`_`): the public
 * surface is Cache's, Loader's and RequestScope's own.
 */
import type { Entry } from './freshness';
import type { StoreSlot } from './store';
import type { Sink } from './metrics';
import type { Policy } from './options';
import type { Source } from './item';
import type { Fill, GetOrComputeOptions } from './types';

/**
 * A caller of `_peek` that has no `arg` to refresh with (the directive, which makes its fill only
 * on a miss): an entry that would need a refresh is then not answered, and the caller takes the
 * promise path with its fill, where the refresh is decided once.
 */
export const NO_ARG: unique symbol = Symbol('herdcache.noArg');

/** A source with its policy, both resolved once (per loader, per @cached field), not per call. */
export interface Computation {
  readonly source: Source;
  readonly policy: Policy;
}

export interface Registry {
  /**
   * @internal Hit, else join the key's flight, else start one. Counted once. `own`: a caller that
   * hands the promise on as its caller's alone (a scoped loader) takes, when it starts the flight
   * without a signal, a promise nobody else holds (ownPending tells it apart from a shared one).
   */
  _load<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
    own?: boolean,
  ): Promise<V>;
  /**
   * @internal
   * The synchronous hit: the entry when the store holds it in process and it answers now (fresh,
   * or stale within grace with a refresh started), counted as a hit or a stale-serve; otherwise
   * undefined, counting nothing (the caller then loads). `slot`: the caller's slot for `key` (a
   * MemoKey, whose `stored` form is then the key's), read through when the store keeps slots.
   */
  _peek(source: Source, key: string, arg: unknown, policy: Policy, sink?: Sink, slot?: StoreSlot): Entry | undefined;
  /** @internal A load that joins and starts no shared flight and never touches the store (a scope's cache: false). */
  _loadAlone<V>(
    source: Source,
    key: string,
    arg: unknown,
    policy: Policy,
    signal: AbortSignal | undefined,
    sink: Sink | undefined,
  ): Promise<V>;
  /** @internal */
  _getOrCompute<V>(
    key: string,
    fill: Fill<V>,
    options: GetOrComputeOptions | undefined,
    sink: Sink | undefined,
  ): Promise<V>;
  /** @internal */
  _write(
    source: Source,
    key: string,
    value: unknown,
    policy: Policy,
    tags: readonly string[] | undefined,
  ): Promise<void>;
  /** @internal `stored: false` (a coalesce-only loader): abandon its fills, touch no store. */
  _invalidate(keys: readonly string[], source: string, stored?: boolean): Promise<void>;
  /** @internal */
  _checkTagsSupported(option: string): void;
}

/**
 * Observer hooks: options.hooks, plus sets added later with cache.observe() (a metrics plugin
 * given only the cache). The sets are combined once per change, so a load reads one hook per
 * event; an observer that throws never fails the load it observes, nor silences the next one.
 */
import { invalidOption } from './errors';
import { checkNestedKeys } from './options';
import type { CacheHooks, FillInfo } from './types';

const HOOK_NAMES = ['onHit', 'onMiss', 'onStale', 'onCoalesced', 'onFill', 'onStoreError', 'wrapFill'] as const;
const KNOWN_HOOKS: ReadonlySet<string> = new Set(HOOK_NAMES);

/** Any of the hooks: each has its own signature, the arguments are passed through as given. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Observer = (...args: any[]) => void;

export class Observers {
  /** What is called: options.hooks alone, or every set fanned out. Read on every load. */
  current: CacheHooks;
  /** options.hooks first, then observe()d sets in the order they were added. */
  #sets: readonly CacheHooks[];

  constructor(hooks: CacheHooks | undefined) {
    if (hooks !== undefined) checkHooks(hooks, 'createCache()');
    this.current = hooks ?? {};
    this.#sets = hooks === undefined ? [] : [hooks];
  }

  /** Adds a set after the others; returns the function that removes it (idempotent). */
  add(hooks: CacheHooks): () => void {
    checkHooks(hooks, 'cache.observe()');
    this.#set([...this.#sets, hooks]);
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      const sets = [...this.#sets];
      sets.splice(sets.indexOf(hooks), 1);
      this.#set(sets);
    };
  }

  /** The hook of a load's outcome. */
  hookFor(counter: 'hits' | 'misses' | 'coalesced' | 'staleServed'): Observer | undefined {
    const hooks = this.current;
    return counter === 'hits'
      ? hooks.onHit
      : counter === 'misses'
        ? hooks.onMiss
        : counter === 'coalesced'
          ? hooks.onCoalesced
          : hooks.onStale;
  }

  #set(sets: readonly CacheHooks[]): void {
    this.#sets = sets;
    this.current = sets.length === 0 ? {} : sets.length === 1 ? sets[0]! : fanOut(sets);
  }
}

/**
 * Calls an observer; one that throws never fails the load it observes, and one that returns a
 * promise (an async hook) has its rejection swallowed, as a throw is: left alone it would be an
 * unhandled rejection, fatal under Node's default.
 */
export function notify(hook: Observer | undefined, args: readonly unknown[]): void {
  if (hook === undefined) return;
  try {
    const result: unknown = hook(...args);
    if (result !== undefined) ignoreRejection(result);
  } catch {
    // Observers never break loads.
  }
}

function ignore(): void {}

/**
 * Observes a returned thenable's rejection so it never surfaces as unhandled: what a user's
 * callback returned when it was to answer synchronously (an async hook, key or tags function, a
 * sessionId…). Left alone, its rejection would end the process under Node's default.
 */
export function ignoreRejection(result: unknown): void {
  onRejection(result, ignore);
}

/** Calls `onRejected` if `result` is a thenable that rejects (its rejection observed). A throwing `then` propagates. */
export function onRejection(result: unknown, onRejected: () => void): void {
  if ((typeof result === 'object' && result !== null) || typeof result === 'function') {
    const then = (result as { then?: unknown }).then;
    if (typeof then === 'function') then.call(result, undefined, onRejected);
  }
}

/** One hooks object calling every set's hook in turn; a throwing observer does not silence the next. */
function fanOut(sets: readonly CacheHooks[]): CacheHooks {
  const out: Record<string, (...args: unknown[]) => void> = {};
  for (const name of HOOK_NAMES) {
    const fns = sets
      .map((set) => set[name] as ((...args: unknown[]) => void) | undefined)
      .filter((fn) => typeof fn === 'function');
    if (fns.length === 0) continue;
    if (name === 'wrapFill') {
      out[name] = nestWrappers(fns as NonNullable<CacheHooks['wrapFill']>[]) as (...args: unknown[]) => void;
      continue;
    }
    out[name] = (...args) => {
      for (const fn of fns) {
        try {
          const result: unknown = fn!(...args);
          if (result !== undefined) ignoreRejection(result);
        } catch {
          // Observers never break loads, nor each other.
        }
      }
    };
  }
  return out as CacheHooks;
}

type FillWrapper = NonNullable<CacheHooks['wrapFill']>;

/** wrapFill hooks nested, the first set's outermost; each runs the fill at most once, and one that throws or does not call it does not stop it. */
function nestWrappers(wrappers: readonly FillWrapper[]): FillWrapper {
  return wrappers.reduceRight<FillWrapper>(
    (inner, outer) =>
      <T>(fill: () => Promise<T>, info: FillInfo) => {
        let started: Promise<T> | undefined;
        const once = () => (started ??= inner(fill, info));
        try {
          ignoreRejection(outer(once, info));
        } catch {
          // Observers never break loads, nor each other.
        }
        return once();
      },
    (fill) => fill(),
  );
}

/** Every hook given must be a function: a typo fails at configuration, not silently on every load. */
function checkHooks(hooks: CacheHooks, where: string): void {
  if (hooks === null || typeof hooks !== 'object') throw invalidOption('hooks', hooks, 'an object of hook functions');
  // A misspelt hook (onHits) would otherwise never be called, silently.
  checkNestedKeys(where, 'hooks', hooks, KNOWN_HOOKS);
  for (const hook of HOOK_NAMES) {
    const fn = hooks[hook];
    if (fn !== undefined && typeof fn !== 'function') throw invalidOption(`hooks.${hook}`, fn, 'a function');
  }
}

/**
 * What a @cached field's (or entity reference's) fill is cached as: a cache holds values, never an
 * error. graphql-js accepts promises and Errors anywhere in a resolver's result and reports each
 * failed one at its own path; with the cache the client gets the same answer, and a result where
 * one failed is not cached (it was: its error was served to every caller until the ttl):
 *
 * - a returned Error (or a rejected result) is the fill's error: thrown, never cached;
 * - a list is awaited item by item (`ids.map((id) => loader.load(id))`);
 * - a plain object or array (prototype Object's, null, Array's) is looked into, at any depth of
 *   plain objects and arrays, for Errors and promises in its own data properties (getters are not
 *   called): its promises (native ones: a lazy thenable, a query builder, is not started) are
 *   awaited (at most SETTLE_WAIT_MS: past it the value is served as it is, not cached), and what
 *   they resolve to looked into as well. Class instances are not looked into, and at most
 *   SCAN_MAX values are. The value is cached as the resolver returned it, its settled promises
 *   in it: graphql-js reads their values, and the memory store's size estimate and redisStore's
 *   JSON codec take each for its value (core/settled; a codec of your own sees the promises).
 *
 * A value where something failed (a rejected promise, an Error) is not cached: its fill fails with
 * a Partial, which partialOrThrow turns back into the value as the resolver returned it, so
 * graphql-js answers it as without a cache: the other items and fields kept, each failed one an
 * error at its own path. Without `partial` (a list that is an entity's value, not a field's) the
 * first failed item fails the call.
 */
import { describe, isError, isThenable } from '../core/errors';
import { noteSettled } from '../core/settled';

/** Values of a result looked at for promises and Errors, at most. */
const SCAN_MAX = 10_000;
/**
 * How long a fill waits for the promises in its value (ms): one that has not settled by then (a
 * slow or never-settling property no query selected) leaves the value served as it is, not cached.
 */
export const SETTLE_WAIT_MS = 1_000;

/** The fill's result, settled: see the header. `partial`: a field's list (answered item by item when items fail). */
export async function settleValue(result: unknown, partial = false): Promise<unknown> {
  let value = await result;
  if (isError(value)) throw value;
  if (Array.isArray(value)) value = await settleList(value, partial);
  else if (!isPlain(value)) return value;
  if (await partFails(value as object)) throw new Partial(value);
  return value;
}

async function settleList(value: unknown[], partial: boolean): Promise<unknown[]> {
  if (!partial) {
    const items = value.some(isThenable) ? await Promise.all(value) : value;
    const failed = items.find(isError);
    if (failed !== undefined) throw failed;
    return items;
  }
  const items: unknown[] = value.some(isThenable)
    ? (await Promise.allSettled(value)).map((item) =>
        item.status === 'fulfilled' ? item.value : asItemError(item.reason),
      )
    : value;
  if (items.some(isError)) throw new Partial(items);
  return items;
}

/**
 * Whether an Error, or a promise that rejects (or resolves to an Error, or to a value holding one),
 * is in `root`'s own data properties, at any depth of plain objects and arrays (see the header).
 * Each promise is handled as soon as it is met and what it resolves to is looked into as soon as it
 * resolves (a rejection there is never left unhandled); all of them are waited for at most
 * SETTLE_WAIT_MS in all.
 */
async function partFails(root: object): Promise<boolean> {
  let budget = SCAN_MAX;
  let failed = false;
  const seen = new Set<object>([root]);
  const waits: Promise<void>[] = [];
  const settled: Promise<unknown>[] = [];
  const values: unknown[] = [];
  // Containers still to look into: a stack, so that depth costs no call frames.
  const stack: object[] = [];
  const meet = (child: unknown): void => {
    if (failed || typeof child !== 'object' || child === null) return;
    if (isError(child)) failed = true;
    else if (child instanceof Promise) {
      waits.push(
        child.then(
          (value: unknown) => {
            settled.push(child);
            values.push(value);
            meet(value);
            drain();
          },
          () => void (failed = true),
        ),
      );
    } else if ((Array.isArray(child) || isPlain(child)) && !seen.has(child)) {
      seen.add(child);
      stack.push(child);
    }
  };
  const drain = (): void => {
    while (stack.length > 0 && !failed && budget > 0) {
      const node = stack.pop()!;
      if (Array.isArray(node)) {
        for (let i = 0; i < node.length && budget-- > 0; i++) meet(node[i]);
      } else {
        for (const key in node) {
          if (budget-- <= 0) break;
          const own = Object.getOwnPropertyDescriptor(node, key);
          if (own !== undefined && 'value' in own) meet(own.value);
        }
      }
    }
  };
  stack.push(root);
  drain();
  const deadline = Date.now() + SETTLE_WAIT_MS;
  // Waited for in rounds: a promise met in what another resolved to joins the next round.
  for (let done = 0; done < waits.length && !failed;) {
    const round = waits.slice(done);
    done = waits.length;
    // Not all settled in time (one never may: a property no query selects): served as it is, not cached.
    if ((await settledWithin(round, deadline - Date.now())) === undefined) return true;
  }
  if (failed) return true;
  // Where the value is measured or written as JSON, each promise stands for its value (core/settled).
  if (settled.length > 0) noteSettled(root, settled, values);
  return false;
}

/** The outcomes of `promises`, or undefined when they have not all settled within `ms`. */
function settledWithin(promises: Promise<unknown>[], ms: number): Promise<PromiseSettledResult<unknown>[] | undefined> {
  if (ms <= 0) return Promise.resolve(undefined);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, ms, undefined);
    timer.unref?.();
  });
  return Promise.race([Promise.allSettled(promises), late]).finally(() => clearTimeout(timer));
}

function isPlain(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * A @cached value where something failed (a list's item, an object's property): a failed fill
 * (nothing cached), whose callers are answered with `value` by partialOrThrow.
 */
export class Partial extends Error {
  constructor(readonly value: unknown) {
    super('herdcache: part of a @cached value failed');
    this.name = 'Partial';
  }
}

/** A failed @cached value's answer: the value when a part of it failed, else the error, thrown. */
export function partialOrThrow(error: unknown): unknown {
  if (error instanceof Partial) return error.value;
  throw error;
}

/** A rejected item's reason as graphql-js reports it: an Error as it is, anything else wrapped as graphql-js does. */
function asItemError(reason: unknown): Error {
  return isError(reason) ? reason : new Error(`Unexpected error value: ${describe(reason)}`, { cause: reason });
}

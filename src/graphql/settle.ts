/**
 * What a @cached field's (or entity reference's) fill is cached as: a cache holds values, never a
 * promise (a rejected one would be served on every hit; Redis would store it as `{}`) and never an
 * error. graphql-js accepts promises and Errors anywhere in a resolver's result, and reports each
 * failed one at its own path; with the cache the client gets the same answer:
 *
 * - a returned Error (or a rejected result) is the fill's error: thrown, never cached;
 * - a list is awaited item by item (`ids.map((id) => loader.load(id))`);
 * - a plain object (its prototype Object's or null) holding promises or Errors in its properties,
 *   at any depth of plain objects and arrays (`{ id, title: fetchTitle() }`), has its promises
 *   awaited and is cached with their values in their place: a copy of the containers on their
 *   paths (the resolver's object is left as it is). Class instances are not looked into. At most
 *   SCAN_MAX values are looked at: past them, the rest is cached as it is. One holding promises
 *   and a node reachable twice (shared, a cycle) is answered as it is and not cached.
 *
 * A value where something failed (a rejected promise, an Error) is not cached: its fill fails with
 * a Partial, which partialOrThrow turns back into the value as the resolver returned it (its
 * settled promises and Errors included), so graphql-js answers it as without a cache: the other
 * items and fields kept, each failed one an error at its own path. Without `partial` (a list that
 * is an entity's value, not a field's) the first failed item fails the call.
 */
import { describe, isError, isThenable } from '../core/errors';

/** Values of an object result looked at for promises and Errors, at most. */
const SCAN_MAX = 1_000;

/** The fill's result, settled: see the header. `partial`: a field's list (answered item by item when items fail). */
export async function settleValue(result: unknown, partial = false): Promise<unknown> {
  const value = await result;
  if (isError(value)) throw value;
  if (Array.isArray(value)) return settleList(value, partial);
  return isPlain(value) ? settleObject(value) : value;
}

async function settleList(value: unknown[], partial: boolean): Promise<unknown> {
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
  return items.some(isError) ? Promise.reject(new Partial(items)) : items;
}

/** Where a promise sits in an object result: the keys from the root, and the promise. */
interface Pending {
  readonly path: readonly (string | number)[];
  readonly promise: PromiseLike<unknown>;
}

async function settleObject(root: object): Promise<unknown> {
  const pending: Pending[] = [];
  let failed = false;
  let shared = false;
  let budget = SCAN_MAX;
  const seen = new Set<object>();
  const scan = (node: object, path: (string | number)[]): void => {
    if (seen.has(node)) {
      shared = true; // a node met twice (shared, or a cycle): looked at once
      return;
    }
    seen.add(node);
    const keys = Array.isArray(node) ? node.keys() : Object.keys(node);
    for (const key of keys) {
      if (--budget < 0 || failed) return;
      const child = (node as Record<string | number, unknown>)[key];
      if (typeof child !== 'object' || child === null) continue;
      if (isError(child)) failed = true;
      else if (isThenable(child)) pending.push({ path: [...path, key], promise: child });
      else if (Array.isArray(child) || isPlain(child)) scan(child, [...path, key]);
    }
  };
  scan(root, []);
  if (failed) throw new Partial(root);
  if (pending.length === 0) return root;
  const settled = await Promise.allSettled(pending.map((slot) => slot.promise));
  // A node met twice: a copy along the promises' paths would leave its other references on the
  // original (its promises in it). Served as it is, as a failed one is, and not cached.
  if (shared || settled.some((outcome) => outcome.status === 'rejected' || isError(outcome.value)))
    throw new Partial(root);
  // The containers on each promise's path copied once, the values put in the copies.
  const copies = new Map<object, Record<string | number, unknown>>();
  const copyOf = (node: object): Record<string | number, unknown> => {
    let copy = copies.get(node);
    if (copy === undefined) {
      copy = Array.isArray(node)
        ? (node.slice() as unknown as Record<number, unknown>)
        : Object.getPrototypeOf(node) === null
          ? Object.assign(Object.create(null) as Record<string, unknown>, node)
          : { ...(node as Record<string, unknown>) }; // spread: an own `__proto__` stays a property
      copies.set(node, copy);
    }
    return copy;
  };
  const top = copyOf(root);
  for (let i = 0; i < pending.length; i++) {
    const { path } = pending[i]!;
    let original = root as Record<string | number, unknown>;
    let copy = top;
    for (let depth = 0; depth < path.length - 1; depth++) {
      const next = original[path[depth]!] as Record<string | number, unknown>;
      copy = copy[path[depth]!] = copyOf(next);
      original = next;
    }
    copy[path[path.length - 1]!] = (settled[i] as PromiseFulfilledResult<unknown>).value;
  }
  return top;
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

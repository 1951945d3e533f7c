/**
 * The values of promises a cached value holds, once they have settled (the GraphQL layer awaits the
 * promises in a @cached field's plain-object value before caching it: graphql/settle.ts). A value
 * is cached as its resolver returned it, promises in it; where it is measured (the memory store's
 * size estimate, ./sizes) or written as JSON (redisStore's codec) a promise stands for its value:
 * JSON has no promise (it writes one as `{}`), and a promise's size is its value's.
 */

/** Fulfilled promises and their values (weakly: a promise no value holds any more is let go). */
const values = new WeakMap<Promise<unknown>, unknown>();
/** Values that hold such promises: only those are written with a replacer. */
const holders = new WeakSet<object>();

/** Notes the fulfilled `promises` (with `outcomes` at the same positions) held by `holder`. */
export function noteSettled(holder: object, promises: readonly Promise<unknown>[], outcomes: readonly unknown[]): void {
  for (let i = 0; i < promises.length; i++) values.set(promises[i]!, outcomes[i]);
  holders.add(holder);
}

/** Whether `value` holds promises noted here (see noteSettled). */
export function holdsSettled(value: unknown): boolean {
  return typeof value === 'object' && value !== null && holders.has(value);
}

/** A promise noted here stands for its value; anything else for itself. */
export function settledValue(value: unknown): unknown {
  return value instanceof Promise && values.has(value) ? values.get(value) : value;
}

/**
 * JSON.stringify's replacer for a value that holds settled promises: each written as its value, as
 * JSON writes that value in its place (its toJSON called: JSON.stringify calls it before the
 * replacer, and not on what the replacer returns: a Date would be written `{}`).
 */
export function settledReplacer(key: string, value: unknown): unknown {
  if (!(value instanceof Promise) || !values.has(value)) return value;
  const settled = values.get(value);
  const toJSON = (settled as { toJSON?: unknown } | null | undefined)?.toJSON;
  return typeof toJSON === 'function' ? (toJSON as (key: string) => unknown).call(settled, key) : settled;
}

/**
 * The response layer's stored copy of a graphql-js result object (see response-result): one
 * object literal per selection shape, compiled once, from the object's values in the shape's key
 * order; keyed stores into a fresh object where a key is absent or code generation is refused.
 */

/** Makes `{ k0: values[0], k1: values[1], … }` for a shape's keys. */
export type Make = (values: readonly unknown[]) => Record<string, unknown>;

/** Response keys a compiled copy takes at most; a GraphQL name (the only keys one is compiled for). */
const MAKER_KEYS = 64;
const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/**
 * A function returning `{ k0: values[0], k1: values[1], … }` for these keys, or undefined where
 * code generation is refused (`--disallow-code-generation-from-strings`) or a key is not a plain
 * GraphQL name (`__proto__` in a literal would set the prototype; none reaches here: see ordered).
 * Safe to compile: each key is a name matched above, written as a JSON string.
 */
export function maker(keys: readonly string[]): Make | undefined {
  if (keys.length === 0 || keys.length > MAKER_KEYS) return undefined;
  for (const key of keys) if (!NAME.test(key) || key === '__proto__') return undefined;
  const fields = keys.map((key, i) => `${JSON.stringify(key)}: values[${i}]`).join(', ');
  try {
    return new Function('values', `'use strict'; return { ${fields} };`) as Make;
  } catch {
    return undefined;
  }
}

/** The copy of an object from its values in `keys`' order (undefined: a key not present); `present` of them are. */
export function copyOf(
  keys: readonly string[],
  make: Make | undefined,
  values: unknown[],
  present: number,
): Record<string, unknown> {
  if (present === keys.length && make !== undefined) return make(values);
  const copy: Record<string, unknown> = {};
  for (let i = 0; i < keys.length; i++) if (values[i] !== undefined) copy[keys[i]!] = values[i];
  return copy;
}

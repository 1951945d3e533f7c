/**
 * Store keys of @cached fields. A key must name exactly one value: two different (field, parent,
 * arguments, session) tuples must never meet under one key, or one parent's (or one user's) value
 * is served for another's.
 *
 * Shape: `${prefix}${Type.field}:[identity,args]` for PUBLIC fields and
 * `${prefix}${Type.field}:[identity,args,session]` for PRIVATE ones, where `identity` is the
 * parent's identity (null on root fields) and `args` the canonical encoding below. The part after
 * the coordinate is JSON (plus the `n` of bigints, which JSON cannot produce), so it decodes one
 * way only; a coordinate is a GraphQL name pair and contains no `:`.
 */
import { invalidArgument, invalidOption } from '../core/errors';

/**
 * Canonical encoding of resolver arguments: JSON with object keys sorted at every depth, so the
 * order in which a client (or a JSON scalar) wrote them does not change the key. Returns
 * `undefined` for what it cannot encode without ambiguity (functions, symbols, non-finite numbers,
 * cycles, Maps, Sets, class instances without toJSON): such a call is not cached at all.
 */
export function canonicalArgs(args: unknown): string | undefined {
  // Most fields take no arguments: graphql-js passes an empty object, encoded without allocating.
  if (isEmptyRecord(args)) return '{}';
  const out: string[] = [];
  return encode(args, out, []) ? out.join('') : undefined;
}

function encode(value: unknown, out: string[], path: object[]): boolean {
  switch (typeof value) {
    case 'string':
      out.push(JSON.stringify(value));
      return true;
    case 'number':
      if (!Number.isFinite(value)) return false;
      out.push(JSON.stringify(value));
      return true;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return true;
    case 'bigint':
      // Not JSON: a bigint 1n and a number 1 or a string "1" must stay apart.
      out.push(`${value.toString()}n`);
      return true;
    case 'object':
      break;
    default:
      // undefined (inside a list), functions, symbols: nothing faithful to write.
      return false;
  }
  if (value === null) {
    out.push('null');
    return true;
  }
  if (path.includes(value)) return false;
  path.push(value);
  const ok = encodeObject(value, out, path);
  path.pop();
  return ok;
}

function encodeObject(value: object, out: string[], path: object[]): boolean {
  if (Array.isArray(value)) {
    out.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.push(',');
      if (!encode(value[i], out, path)) return false;
    }
    out.push(']');
    return true;
  }
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    // Custom scalars (Date, Decimal…) say what they are through toJSON; anything else (Map, Set,
    // a class) would encode as {} and collide, so it is refused.
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    return typeof toJSON === 'function' ? encode(toJSON.call(value), out, path) : false;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  out.push('{');
  let first = true;
  for (const key of keys) {
    const field = record[key];
    // An absent argument and one set to undefined are the same call (graphql-js never sets undefined).
    if (field === undefined) continue;
    if (!first) out.push(',');
    first = false;
    out.push(JSON.stringify(key), ':');
    if (!encode(field, out, path)) return false;
  }
  out.push('}');
  return true;
}

export const DEFAULT_KEY_PREFIX = 'gql:';

function isEmptyRecord(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key in value) if (Object.hasOwn(value, key) && (value as Record<string, unknown>)[key] !== undefined) return false;
  return true;
}

/** The store key of one @cached field call. `session` is given for PRIVATE fields only. */
export function fieldKey(prefix: string, coordinate: string, identity: string | undefined, args: string, session?: string): string {
  return fieldKeyAfter(fieldKeyHead(prefix, coordinate), identity, args, session);
}

/** What every key of one field starts with: made once per field, not per call. */
export function fieldKeyHead(prefix: string, coordinate: string): string {
  return `${prefix}${coordinate}:[`;
}

/** fieldKey() after its head: one string built per call, identical to fieldKey's. */
export function fieldKeyAfter(head: string, identity: string | undefined, args: string, session?: string): string {
  const tail = session === undefined ? ']' : `,${JSON.stringify(session)}]`;
  return head + (identity === undefined ? 'null' : JSON.stringify(identity)) + ',' + args + tail;
}

/**
 * A parent's identity as a key part: a non-empty string, or a finite number / bigint as its
 * decimal string (an ID is the same entity whether it arrives as 1 or "1"). Anything else:
 * no identity.
 */
export function identityString(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : undefined;
  if (typeof value === 'bigint') return value.toString();
  return undefined;
}

export interface CachedFieldKeyOptions {
  /** The parent's identity, for non-root fields (what the `identity` option, or `id`, gives). */
  identity?: string | number;
  /**
   * The arguments as the resolver receives them: after coercion, so with every default value
   * filled in (`user(id: ID!, locale: String = "en")` is keyed with `locale: "en"` when absent).
   */
  args?: Record<string, unknown>;
  /** The session, for PRIVATE fields. */
  session?: string;
  /** The transform's keyPrefix. Default "gql:". */
  keyPrefix?: string;
}

/**
 * The store key of a @cached field call, for invalidation after a write:
 * `await cache.invalidate(cachedFieldKey('Query.user', { args: { id } }))`.
 */
export function cachedFieldKey(coordinate: string, options: CachedFieldKeyOptions = {}): string {
  if (typeof coordinate !== 'string' || !/^[_A-Za-z][_0-9A-Za-z]*\.[_A-Za-z][_0-9A-Za-z]*$/.test(coordinate)) {
    throw invalidArgument('coordinate', coordinate, 'a field coordinate such as "Query.user"');
  }
  const { identity, args = {}, session, keyPrefix = DEFAULT_KEY_PREFIX } = options;
  const encoded = canonicalArgs(args);
  if (encoded === undefined) throw invalidOption('args', args, 'arguments that can be keyed (see canonicalArgs)');
  let id: string | undefined;
  if (identity !== undefined) {
    id = identityString(identity);
    if (id === undefined) throw invalidOption('identity', identity, 'a non-empty string or a finite number');
  }
  return fieldKey(keyPrefix, coordinate, id, encoded, session);
}

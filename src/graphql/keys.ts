/**
 * Store keys of @cached fields. A key must name exactly one value: two different (field, parent,
 * arguments, session) tuples must never meet under one key, or one parent's (or one user's) value
 * is served for another's.
 *
 * Shape: `\0field\0${prefix}${Type.field}:[identity,args]` for PUBLIC fields and
 * `…:[identity,args,session]` for PRIVATE ones, where `\0field\0` is the field namespace (a head
 * no getOrCompute or loader key can spell, see core/namespaces), `identity` the parent's identity
 * (null on root fields) and `args` the canonical encoding below. The part after the coordinate is
 * JSON (plus the `n` of bigints, and `#` + sha256 for long arguments, neither of which JSON can
 * produce), so it decodes one way only; a coordinate is a GraphQL name pair and contains no `:`.
 *
 * Arguments come from the client, so their encoding is bounded before anything is allocated for
 * it: graphql-js hands a resolver N references to one variable as N references to one string, and
 * writing each out would let one small request allocate N times a large variable.
 */
import { createHash, type Hash } from 'node:crypto';
import { invalidArgument, invalidOption } from '../core/errors';
import { FIELD_NAMESPACE, namespaceHead } from '../core/namespaces';
import { checkKnownKeys, optionNames } from '../core/options';
import { ignoreRejection } from '../core/hooks';

/** Encoded arguments longer than this (UTF-16 code units) are keyed by their sha256, streamed part by part. */
export const ARGS_INLINE_MAX = 1024;
/**
 * Encoded arguments longer than this are not keyed at all: the call is resolved without the
 * cache (bypassed, "args_too_large"). Counted as the encoding is written, so the walk stops there.
 */
export const ARGS_MAX_LENGTH = 64 * 1024;
/** Lists and input objects nested deeper than this are not keyed ("args_too_deep"). */
export const ARGS_MAX_DEPTH = 64;

/** Why arguments have no key: the @cached directive's bypass reasons. */
export type UnkeyableArgs = 'unkeyable_args' | 'args_too_large' | 'args_too_deep';

/**
 * Canonical encoding of resolver arguments: JSON with object keys sorted at every depth, so the
 * order in which a client (or a JSON scalar) wrote them does not change the key; `-0` is written
 * `-0` (JSON writes it `0`, and `1 / x` tells them apart). Encodings longer than ARGS_INLINE_MAX
 * are replaced by `#` and the sha256 (hex) of the encoding. Returns `undefined` for what it
 * cannot encode without ambiguity (functions, symbols, non-finite numbers, cycles, Maps, Sets,
 * class instances without toJSON) or within bounds (longer than ARGS_MAX_LENGTH, nested deeper
 * than ARGS_MAX_DEPTH): such a call is not cached at all.
 */
export function canonicalArgs(args: unknown): string | undefined {
  const encoded = encodeArgs(args);
  return encoded === 'unkeyable_args' || encoded === 'args_too_large' || encoded === 'args_too_deep'
    ? undefined
    : encoded;
}

/** canonicalArgs, or why there is none. An encoding never equals a reason (it is JSON, or starts with '#'). */
export function encodeArgs(args: unknown): string | UnkeyableArgs {
  // Most fields take no arguments: graphql-js passes an empty object, encoded without allocating.
  if (isEmptyRecord(args)) return '{}';
  const flat = encodeFlat(args);
  if (flat !== undefined) return flat;
  const out = new KeyWriter();
  const failure = encode(args, out, []);
  return failure ?? out.result();
}

/**
 * Where the encoding goes: parts kept while short, then a sha256 fed part by part, so the whole
 * encoding is never one string however long it grows (up to ARGS_MAX_LENGTH).
 */
class KeyWriter {
  length = 0;
  #parts: string[] = [];
  #hash: Hash | undefined;

  /** Whether `more` characters still fit: asked before a part is built. */
  fits(more: number): boolean {
    return this.length + more <= ARGS_MAX_LENGTH;
  }

  /** Appends `part`; false when the encoding passes ARGS_MAX_LENGTH. */
  write(part: string): boolean {
    this.length += part.length;
    if (this.length > ARGS_MAX_LENGTH) return false;
    if (this.#hash !== undefined) {
      this.#hash.update(part, 'utf8'); // parts are JSON (or ASCII): well-formed, so UTF-8 is injective
      return true;
    }
    this.#parts.push(part);
    if (this.length > ARGS_INLINE_MAX) {
      const hash = (this.#hash = createHash('sha256'));
      for (const kept of this.#parts) hash.update(kept, 'utf8');
      this.#parts = [];
    }
    return true;
  }

  result(): string {
    return this.#hash === undefined ? this.#parts.join('') : `#${this.#hash.digest('hex')}`;
  }
}

// Depth-first, recursive: `path` (the objects being encoded) bounds the recursion at
// ARGS_MAX_DEPTH and catches cycles, so the stack never holds more than that many frames.
function encode(value: unknown, out: KeyWriter, path: object[]): UnkeyableArgs | undefined {
  switch (typeof value) {
    case 'string':
      // A JSON string is at least its length + 2: checked before JSON.stringify allocates it.
      if (!out.fits(value.length + 2)) return 'args_too_large';
      return out.write(JSON.stringify(value)) ? undefined : 'args_too_large';
    case 'number':
      if (!Number.isFinite(value)) return 'unkeyable_args';
      // JSON writes -0 as 0, and `1 / x` tells them apart: -0 has its own key.
      return out.write(Object.is(value, -0) ? '-0' : JSON.stringify(value)) ? undefined : 'args_too_large';
    case 'boolean':
      return out.write(value ? 'true' : 'false') ? undefined : 'args_too_large';
    case 'bigint':
      // Not JSON: a bigint 1n and a number 1 or a string "1" must stay apart.
      return out.write(`${value.toString()}n`) ? undefined : 'args_too_large';
    case 'object':
      break;
    default:
      // undefined (inside a list), functions, symbols: nothing faithful to write.
      return 'unkeyable_args';
  }
  if (value === null) return out.write('null') ? undefined : 'args_too_large';
  if (path.length >= ARGS_MAX_DEPTH) return 'args_too_deep';
  if (path.includes(value)) return 'unkeyable_args';
  path.push(value);
  const failure = encodeObject(value, out, path);
  path.pop();
  return failure;
}

function encodeObject(value: object, out: KeyWriter, path: object[]): UnkeyableArgs | undefined {
  if (Array.isArray(value)) {
    if (!out.write('[')) return 'args_too_large';
    for (let i = 0; i < value.length; i++) {
      if (i > 0 && !out.write(',')) return 'args_too_large';
      const failure = encode(value[i], out, path);
      if (failure !== undefined) return failure;
    }
    return out.write(']') ? undefined : 'args_too_large';
  }
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    // Custom scalars (Date, Decimal…) say what they are through toJSON; anything else (Map, Set,
    // a class) would encode as {} and collide, so it is refused. So is one whose toJSON says
    // nothing (an invalid Date's null would be the key of an argument set to null).
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON !== 'function') return 'unkeyable_args';
    const json: unknown = toJSON.call(value);
    return json === null || json === undefined ? 'unkeyable_args' : encode(json, out, path);
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  // Each key is written at least as `"k":` (3 more characters): a record that cannot fit is
  // refused before its keys are sorted.
  if (!out.fits(keys.length * 4)) return 'args_too_large';
  keys.sort();
  if (!out.write('{')) return 'args_too_large';
  let first = true;
  for (const key of keys) {
    const field = record[key];
    // An absent argument and one set to undefined are the same call (graphql-js never sets one, and
    // omits an input object's unset fields). Deeper, inside a custom scalar's value (a JSON
    // scalar's `{ a: $unset }` is `{ a: undefined }`), a resolver can tell it from `{}` (`'a' in v`):
    // nothing faithful to write.
    if (field === undefined) {
      if (path.length > 1) return 'unkeyable_args';
      continue;
    }
    if (!first && !out.write(',')) return 'args_too_large';
    first = false;
    if (!out.fits(key.length + 3) || !out.write(JSON.stringify(key)) || !out.write(':')) return 'args_too_large';
    const failure = encode(field, out, path);
    if (failure !== undefined) return failure;
  }
  return out.write('}') ? undefined : 'args_too_large';
}

/** Keys of a record taken by encodeFlat; a larger one takes the general path. */
const FLAT_MAX_KEYS = 16;

/**
 * The general encoding of a plain record of scalars (strings, finite numbers, booleans, null:
 * a request's variables, most arguments), written directly: exactly encode()'s output, without
 * its writer and path. Undefined for anything else, or past ARGS_INLINE_MAX: the general path decides.
 */
function encodeFlat(args: unknown): string | undefined {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return undefined;
  const proto = Object.getPrototypeOf(args) as object | null;
  if (proto !== Object.prototype && proto !== null) return undefined;
  const record = args as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length > FLAT_MAX_KEYS) return undefined;
  keys.sort();
  let out = '{';
  for (const key of keys) {
    const value = record[key];
    if (value === undefined) continue; // as encodeObject: an absent argument
    const part = flatPart(value);
    if (part === undefined) return undefined;
    out += (out.length === 1 ? '' : ',') + JSON.stringify(key) + ':' + part;
    if (out.length >= ARGS_INLINE_MAX) return undefined; // with its '}', it may be hashed: the general path
  }
  return out + '}';
}

/** A flat value's canonical encoding (encodeFlat), or undefined: not flat, or for the general path. */
export function flatPart(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return value.length > ARGS_INLINE_MAX ? undefined : JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) return undefined;
      return Object.is(value, -0) ? '-0' : JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      return value === null ? 'null' : undefined;
    default:
      return undefined;
  }
}

const UNKEYABLE: Record<UnkeyableArgs, string> = {
  unkeyable_args: 'hold a value without a faithful encoding',
  args_too_large: `encode past ${ARGS_MAX_LENGTH} characters`,
  args_too_deep: `nest deeper than ${ARGS_MAX_DEPTH} levels`,
};

/** Where every @cached key lives: a namespace getOrCompute and loader keys cannot reach. */
const FIELD_KEY_HEAD = namespaceHead(FIELD_NAMESPACE);

export const DEFAULT_KEY_PREFIX = 'gql:';

function isEmptyRecord(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key in value)
    if (Object.hasOwn(value, key) && (value as Record<string, unknown>)[key] !== undefined) return false;
  return true;
}

/** The store key of one @cached field call. `session` is given for PRIVATE fields only. */
export function fieldKey(
  prefix: string,
  coordinate: string,
  identity: string | undefined,
  args: string,
  session?: string,
): string {
  return fieldKeyAfter(fieldKeyHead(prefix, coordinate), identity, args, session);
}

/** What every key of one field starts with: made once per field, not per call. */
export function fieldKeyHead(prefix: string, coordinate: string): string {
  return `${FIELD_KEY_HEAD}${prefix}${coordinate}:[`;
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
  /** The session, for PRIVATE fields: what `sessionId` answered (a number or bigint is read as its string, as there). */
  session?: string | number | bigint;
  /** The transform's keyPrefix. Default "gql:". */
  keyPrefix?: string;
}

const CACHED_FIELD_KEY_OPTIONS = optionNames<CachedFieldKeyOptions>({
  identity: true,
  args: true,
  session: true,
  keyPrefix: true,
});

/**
 * The store key of a @cached field call, for invalidation after a write:
 * `await cache.invalidate(cachedFieldKey('Query.user', { args: { id } }))`.
 */
export function cachedFieldKey(coordinate: string, options: CachedFieldKeyOptions = {}): string {
  if (typeof coordinate !== 'string' || !/^[_A-Za-z][_0-9A-Za-z]*\.[_A-Za-z][_0-9A-Za-z]*$/.test(coordinate)) {
    throw invalidArgument('coordinate', coordinate, 'a field coordinate such as "Query.user"');
  }
  if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
  // A misspelt `args` would give the key of the call without arguments: an invalidation that misses.
  checkKnownKeys('cachedFieldKey()', options, CACHED_FIELD_KEY_OPTIONS);
  const { identity, args = {}, session, keyPrefix = DEFAULT_KEY_PREFIX } = options;
  // Each checked as the directive reads it: a key it never builds would invalidate nothing.
  if (typeof keyPrefix !== 'string')
    throw invalidOption('keyPrefix', keyPrefix, 'a string (the transform’s keyPrefix)');
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    throw invalidOption('args', args, 'an object of the field’s arguments');
  let sessionPart: string | undefined;
  if (session !== undefined) {
    sessionPart = identityString(session);
    if (sessionPart === undefined)
      throw invalidOption(
        'session',
        session,
        'a non-empty string, a finite number or a bigint (what sessionId answered)',
      );
  }
  const encoded = encodeArgs(args);
  if (encoded === 'unkeyable_args' || encoded === 'args_too_large' || encoded === 'args_too_deep') {
    // The directive resolves such calls without the cache: there is nothing to invalidate.
    throw invalidOption('args', args, `arguments that can be keyed (see canonicalArgs): these ${UNKEYABLE[encoded]}`);
  }
  let id: string | undefined;
  if (identity !== undefined) {
    id = identityString(identity);
    if (id === undefined) throw invalidOption('identity', identity, 'a non-empty string or a finite number');
  }
  return fieldKey(keyPrefix, coordinate, id, encoded, sessionPart);
}

/**
 * The identity of a parent and the values of the fields a @requires names (`["1",{"weight":5}]`:
 * canonical JSON, bounded as arguments are), or undefined (no identity, or values it cannot key).
 */
export function withRequired(
  identityOf: (parent: any) => unknown,
  names: readonly string[],
): (parent: object) => unknown {
  return (parent) => {
    const id = identityOfParent(identityOf, parent);
    if (id === undefined) return undefined;
    const encoded = encodeFields(parent, names);
    return encoded === undefined ? undefined : `[${JSON.stringify(id)},${encoded}]`;
  };
}

/**
 * `parent`'s fields `names` as canonicalArgs encodes them, or undefined: values it cannot key, or
 * (`whole`) a field missing or null (an entity's key: without one of them, no identity).
 */
export function encodeFields(parent: object, names: readonly string[], whole = false): string | undefined {
  const values: Record<string, unknown> = {};
  for (const name of names) {
    const value = (parent as Record<string, unknown>)[name];
    if (whole && (value === undefined || value === null)) return undefined;
    values[name] = value;
  }
  return canonicalArgs(values);
}

/**
 * The parent's identity (see identityString), or undefined: none, or the `identity` function threw
 * (or answered a Promise, whose rejection is observed): the call is then resolved without the
 * cache (no_identity), never failed by it.
 */
export function identityOfParent(identityOf: (parent: any) => unknown, parent: object): string | undefined {
  let value: unknown;
  try {
    value = identityOf(parent);
  } catch {
    return undefined;
  }
  const identity = identityString(value);
  if (identity === undefined) ignoreRejection(value);
  return identity;
}

/**
 * Key namespaces of herdcache's own (the @cached directive's field entries, whole responses):
 * store keys that no getOrCompute key and no loader key can spell, whatever string the app passes.
 *
 * Every such key starts with NAMESPACE_MARK (U+0000), then the namespace's name, the mark again,
 * then the owner's own key. getOrCompute (cache and request scope) refuses a key starting with the
 * mark, and a loader's keys start with its name, which may not start with it: so an app that
 * builds a raw key from client input (`${lang}:${slug}`) can never read or write a directive's or a
 * response's entry, nor another session's PRIVATE one. cache.invalidate() still takes these keys
 * (what cachedFieldKey returns): removing an entry reveals nothing and plants nothing.
 *
 * Refusing (not escaping) keeps raw keys stored as they always were and costs the hit path one
 * charCodeAt; U+0000 is chosen because no key an app means to write starts with it.
 */
import { HerdcacheError, describe } from './errors';

export const NAMESPACE_MARK = '\u0000';
const MARK_CODE = 0;

/** Whether `key` is in one of herdcache's own namespaces (so not a key getOrCompute may take). */
export function isNamespacedKey(key: string): boolean {
  return key.charCodeAt(0) === MARK_CODE;
}

/**
 * What every key of the namespace `name` starts with. Distinct names give heads that are no
 * prefix of one another (a name holds no mark, and the head ends with one).
 */
export function namespaceHead(name: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.includes(NAMESPACE_MARK)) {
    throw new HerdcacheError(
      'E_INVALID_ARGUMENT',
      `herdcache: a key namespace must be a non-empty string without U+0000, got ${describe(name)}`,
    );
  }
  return NAMESPACE_MARK + name + NAMESPACE_MARK;
}

/** The namespace of @cached field entries (src/graphql). */
export const FIELD_NAMESPACE = 'field';
/** The namespace of whole-response entries. */
export const RESPONSE_NAMESPACE = 'response';

export function reservedKeyError(name: string, key: string): HerdcacheError {
  return new HerdcacheError(
    'E_INVALID_KEY',
    `herdcache: argument "${name}" must not start with U+0000: keys starting with it belong to herdcache's own namespaces (@cached fields, responses), got ${describe(key)}`,
  );
}

export function checkKey(key: unknown, name: string): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new HerdcacheError(
      'E_INVALID_KEY',
      `herdcache: argument "${name}" must be a non-empty string, got ${describe(key)}`,
    );
  }
}

/** A key the app may compute under: non-empty, and outside herdcache's own namespaces. */
export function checkRawKey(key: unknown, name: string): asserts key is string {
  checkKey(key, name);
  if (isNamespacedKey(key)) throw reservedKeyError(name, key);
}

/**
 * One-time process warnings about a user callback's answer at request time (a `sessionId` that
 * returns a Promise, a `vary` that throws…). At request time the cache never fails a request: the
 * request is served without the cache (bypassed), and the mistake, which would otherwise show only
 * as a cache that never hits, is said once through `process.emitWarning`, as the registry says a
 * missing ttl (HERDCACHE_NO_TTL). Once per owner (a plugin, a transform) and per kind of mistake,
 * not per request: a bad callback is wrong for every request.
 */
import { ignoreRejection } from '../core/hooks';

export { ignoreRejection };

/**
 * Calls an observer the application gave (onBypass): one that throws, or an async one that
 * rejects, never fails the request it observes (nor, left unhandled, the process).
 */
export function notifyQuietly<A extends unknown[]>(observer: ((...args: A) => unknown) | undefined, ...args: A): void {
  if (observer === undefined) return;
  try {
    ignoreRejection(observer(...args));
  } catch {
    // An observer never breaks the call it observes.
  }
}
export class OnceWarnings {
  readonly #said = new Set<string>();

  /** Emits `message` with `code` the first time `key` is given to this owner. */
  warn(key: string, code: string, message: string): void {
    if (this.#said.has(key)) return;
    this.#said.add(key);
    process.emitWarning(message, { code });
  }
}

export { isThenable } from '../core/errors';

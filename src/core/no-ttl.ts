/**
 * The warning of a load that stores nothing for want of a ttl (NO_TTL_WARNING): a store other
 * than the in-process memory store keeps values for other processes, and a cache given one and no
 * ttl most likely forgot it (coalesce-only stores nothing). Said once per loader or getOrCompute label.
 */
import type { Source } from './item';
import { Loader } from './loader';
import { NO_TTL_WARNING } from './options';

export class NoTtlWarnings {
  /** Sources (loaders, getOrCompute and its labels) already warned that they store nothing. */
  readonly #warned = new WeakSet<Source>();
  readonly #storeName: string;
  readonly #getOrCompute: Source;

  constructor(storeName: string, getOrCompute: Source) {
    this.#storeName = storeName;
    this.#getOrCompute = getOrCompute;
  }

  /** Once per loader or getOrCompute label: a load on a shared store with no ttl given stores nothing. */
  warn(source: Source, key: string): void {
    if (this.#warned.has(source)) return;
    this.#warned.add(source);
    const who =
      source instanceof Loader
        ? `loader ${JSON.stringify(source.name)}`
        : `getOrCompute(${JSON.stringify(key.length > 80 ? `${key.slice(0, 80)}…` : key)}${source === this.#getOrCompute ? '' : `, { label: ${JSON.stringify(source.name)} }`})`;
    process.emitWarning(
      `herdcache: ${who} stores nothing in the ${this.#storeName} store: no ttl is given (on createCache(), the loader or the call), and without one values are only coalesced in this process (coalesce-only), never written for other replicas. Give a ttl (ms) to cache them, or ttl: 0 to coalesce only on purpose (no warning).`,
      { code: NO_TTL_WARNING },
    );
  }
}

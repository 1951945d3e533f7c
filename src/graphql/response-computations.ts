/**
 * What the response layer loads each operation's responses with through the registry: a
 * computation (source and policy: the ttl the operation's maxAge, its swr, late tags) per maxAge
 * and swr pair, up to 256 pairs. A known operation keeps its own (KnownOperation.computation): this
 * is asked once per operation, and per request only of a document of several operations.
 */
import type { Cache } from '../core/cache';
import { type Computation, computationOf } from '../core/internal';
import type { StaticPolicy } from './response-policy';

export class ResponseComputations {
  readonly #cache: Cache;
  /** The option's swr (seconds), over the operations' own. */
  readonly #swr: number | undefined;
  readonly #byPair = new Map<string, Computation>();

  constructor(cache: Cache, swr: number | undefined) {
    this.#cache = cache;
    this.#swr = swr;
  }

  /** The computation of `policy`'s responses; throws when the cache cannot take it (closed…). */
  of(policy: StaticPolicy): Computation {
    const swr = this.#swr ?? policy.swr;
    const pair = `${policy.maxAge}/${swr}`;
    let computation = this.#byPair.get(pair);
    if (computation === undefined) {
      const resolved = computationOf(this.#cache, { ttl: policy.maxAge * 1000, swr: swr * 1000, label: 'response' });
      computation = { source: resolved.source, policy: { ...resolved.policy, lateTags: true } };
      if (this.#byPair.size < 256) this.#byPair.set(pair, computation);
    }
    return computation;
  }
}

/**
 * Which keys this store last read present in Redis, and until when Redis keeps them (their entry's
 * staleUntil, the PX they were written with): FillLock.readOrAcquire reads those with a plain MGET,
 * and the others with the script that also tries the lock of a missing key (scripts.ts,
 * READ_OR_ACQUIRE). A warm hit so stays one MGET (a script costs Redis ~9 µs and ~0.6 µs a key more
 * than MGET), and a cold key's filler starts after one round trip instead of two.
 *
 * A hint, never a guarantee: a key gone before its time (evicted, invalidated by another replica)
 * is read, found missing and then locked in a second call, as before; a key expected missing that
 * is there is read by the script, which returns its value untried. Bounded: the oldest hint goes
 * when `cap` are kept. Times are Date.now(), the registry's default clock: a registry on another
 * clock only gets other predictions, never other answers.
 */
import type { Entry } from '../core/freshness';

/** Hints kept at most: ~60 bytes a key besides the key itself (shared with the registry's strings). */
export const PRESENCE_HINTS = 10_000;

export class PresenceHints {
  readonly #until = new Map<string, number>();
  readonly #cap: number;

  constructor(cap = PRESENCE_HINTS) {
    this.#cap = cap;
  }

  /** Until when `key` was read present (Redis keeps it until then), or undefined. */
  until(key: string): number | undefined {
    return this.#until.get(key);
  }

  /** saw(), for a key whose until() was just read as `known`: no second lookup when unchanged. */
  sawKnown(key: string, known: number, entry: Entry | undefined): void {
    if (entry === undefined || entry.staleUntil !== known) this.saw(key, entry);
  }

  /** What a read of `key` found (undefined: missing, or undecodable). */
  saw(key: string, entry: Entry | undefined): void {
    const hints = this.#until;
    if (entry === undefined) {
      if (hints.size > 0) hints.delete(key);
      return;
    }
    const until = entry.staleUntil;
    const known = hints.get(key);
    if (known === until) return;
    if (known === undefined && hints.size >= this.#cap) hints.delete(hints.keys().next().value!);
    hints.set(key, until);
  }

  /** Keys deleted here: read (and locked) as missing next time. */
  forget(keys: readonly string[]): void {
    const hints = this.#until;
    if (hints.size > 0) for (const key of keys) hints.delete(key);
  }

  clear(): void {
    this.#until.clear();
  }

  get size(): number {
    return this.#until.size;
  }
}

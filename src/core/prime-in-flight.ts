/**
 * A prime between its start and its write (it awaits the tag versions and the fence first): an
 * invalidation of its key or of one of its tags, a clear, or a later prime of its key meanwhile
 * supersedes it, and it writes nothing (the next load fills). Without this, on a store that does
 * not fence the write itself (the memory store; any store's clear), the primed value would land
 * after the invalidation and stay for its ttl.
 */
export interface PrimeInFlight {
  readonly key: string;
  readonly tags: readonly string[] | undefined;
  superseded: boolean;
  /** Its value is known (a promise's, once settled): it fences the key, and writes unless superseded. */
  valueKnown: boolean;
  /** Settles when it has fenced (and written): a later prime of the key writes after it. */
  readonly done: Promise<void>;
}

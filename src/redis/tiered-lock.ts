/**
 * FillLock.readOrAcquire for the tiered store: fresh L1 copies answer, as getMany answers them;
 * the other keys go to the L2's readOrAcquire (read-or-lock.ts), one call that reads them and tries
 * the locks of those it finds missing. So a key cold in both tiers costs one round trip before its
 * fill starts, as on a redisStore, instead of an L2 read and then a lock call. What the L2 read
 * found is copied into L1 under the same rules as getMany's (a change window opened before the
 * call: a change heard or made meanwhile refuses the copy; tagged copies only once their versions
 * are found current).
 */
import { StorePartialError } from '../core/errors';
import type { Entry } from '../core/freshness';
import type { FillLock, LockAttempt, ReadAttempts } from '../core/store';
import type { Candidate, L1Copies } from './tiered-l1';

export async function readOrAcquire(
  l1: L1Copies,
  inner: FillLock,
  keys: readonly string[],
  lockable: readonly boolean[],
  token: string,
  ttlMs: number,
  now: number,
  clock: boolean,
): Promise<ReadAttempts> {
  const n = keys.length;
  const entries = new Array<Entry | undefined>(n);
  const attempts = new Array<LockAttempt | undefined>(n);
  let missing: number[] | undefined;
  for (let i = 0; i < n; i++) {
    const copy = l1.fresh(keys[i]!, now);
    if (copy !== undefined) entries[i] = copy;
    else (missing ??= []).push(i);
  }
  if (missing === undefined) return { entries, attempts, watch: undefined };
  const all = missing.length === n;
  const asked = all ? keys : missing.map((i) => keys[i]!);
  const window = l1.open(now);
  let read: ReadAttempts;
  try {
    const locks = all ? lockable : missing.map((i) => lockable[i] === true);
    // The tag clock, when asked, is read by the L2 in the same call (tag-clock.ts).
    read = await inner.readOrAcquire!(asked, locks, token, ttlMs, clock);
  } catch (error) {
    l1.discard(window);
    if (!(error instanceof StorePartialError)) throw error;
    // Answered in part (a Cluster master down): that part, in the caller's order; nothing copied.
    const partial = error.partial as ReadAttempts;
    place(missing, partial, entries, attempts);
    throw new StorePartialError(
      error.failure,
      { entries, attempts, watch: partial.watch } satisfies ReadAttempts,
      error.message,
      error.failedAt?.map((j) => missing[j]!),
    );
  }
  place(missing, read, entries, attempts);
  const candidates: Candidate[] = [];
  let gone: string[] | undefined;
  for (let j = 0; j < asked.length; j++) {
    const entry = read.entries[j];
    if (entry !== undefined) candidates.push({ key: asked[j]!, entry });
    else (gone ??= []).push(asked[j]!);
  }
  if (gone !== undefined) l1.forget(window, gone);
  l1.promote(window, candidates);
  return read.clock === undefined
    ? { entries, attempts, watch: read.watch }
    : { entries, attempts, watch: read.watch, clock: read.clock };
}

/** The L2's answers for the keys at `indices`, put at those indices. */
function place(
  indices: readonly number[],
  read: ReadAttempts,
  entries: (Entry | undefined)[],
  attempts: (LockAttempt | undefined)[],
): void {
  for (let j = 0; j < indices.length; j++) {
    entries[indices[j]!] = read.entries[j];
    attempts[indices[j]!] = read.attempts[j];
  }
}

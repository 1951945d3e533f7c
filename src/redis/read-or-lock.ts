/**
 * FillLock.readOrAcquire for the Redis store: the pipeline's read, which also tries the lock of the
 * keys it finds missing, so a cold key costs one round trip before its fill starts (and its waiters
 * are registered as such) instead of a read and then a lock call.
 *
 * Keys this store read present and not yet expired (presence.ts) are read with MGET, as getMany
 * does: a warm hit never pays for a script. The other lockable keys go to READ_OR_ACQUIRE
 * (scripts.ts), sent in the same tick, so on the same round trip: a value there is returned as
 * MGET would; a missing key's lock is tried as ACQUIRE tries it. A key the registry cannot use
 * (stale, invalidated by its tags) or that MGET found missing gets its lock in a separate call, as
 * before. The watch is opened on the tried keys before the call: a key found held registers this
 * store as its waiter, and the holder's announcement may arrive before the reply.
 */
import { StorePartialError } from '../core/errors';
import type { Entry } from '../core/freshness';
import type { LockAttempt, LockWatch, ReadAttempts } from '../core/store';
import { pick, withLockKeys } from './keys';
import { toPx, type Raw, type RedisLink } from './link';
import type { LockScripts } from './scripts';

/** What readOrAcquire needs from the store and its lock. */
export interface ReadOrLockDeps {
  readonly link: RedisLink;
  readonly scripts: LockScripts;
  /** The store's getMany (one MGET); what it finds is recorded here, in link.presence. */
  read(keys: readonly string[]): Promise<(Entry | undefined)[]>;
  /** The store's tag clock (tag-clock.ts), read beside the locks when asked. */
  tagClock(): Promise<number>;
  /** Opens a watch on `keys` before they are tried; undefined: none to open (no subscriber yet). */
  readonly watch: ((keys: readonly string[]) => LockWatch | undefined) | undefined;
  waiterId(): string;
  /** Called before a call that may take locks under `token` (the release ledger, pending writes). */
  locking(token: string, ttlMs: number): void;
  /** The locks a timed-out call (one group of it) turned out to win: released. */
  releaseLate(indices: readonly number[] | null, keys: readonly string[], reply: (number | Raw)[], token: string): void;
}

interface Tried {
  readonly entries: (Entry | undefined)[];
  readonly attempts: (LockAttempt | undefined)[];
}

export async function readOrAcquire(
  deps: ReadOrLockDeps,
  keys: readonly string[],
  lockable: readonly boolean[],
  token: string,
  ttlMs: number,
  clock = false,
): Promise<ReadAttempts> {
  const n = keys.length;
  const presence = deps.link.presence;
  const now = Date.now();
  let tried: number[] | undefined;
  /** Per key, until when it was read present (NaN: unknown): one lookup a key, reused to record the read. */
  const until = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const known = presence.until(keys[i]!);
    until[i] = known ?? NaN;
    if (lockable[i] === true && !(known !== undefined && now < known)) (tried ??= []).push(i);
  }
  const attempts = new Array<LockAttempt | undefined>(n);
  // Every key expected present (a warm read): getMany, exactly (its partial failure in our shape).
  if (tried === undefined) {
    let entries: (Entry | undefined)[];
    try {
      entries = await deps.read(keys);
    } catch (error) {
      if (!(error instanceof StorePartialError)) throw error;
      entries = error.partial as (Entry | undefined)[];
      throw new StorePartialError(
        error.failure,
        { entries, attempts, watch: undefined } satisfies ReadAttempts,
        error.message,
        error.failedAt,
      );
    }
    for (let i = 0; i < n; i++) presence.sawKnown(keys[i]!, until[i]!, entries[i]);
    return { entries, attempts, watch: undefined };
  }
  let known: number[] | undefined;
  if (tried.length < n)
    for (let i = 0, t = 0; i < n; i++)
      if (tried[t] === i) t++;
      else (known ??= []).push(i);
  const triedKeys = known === undefined ? keys : pick(keys, tried);
  const watch = deps.watch?.(triedKeys);
  const entries = new Array<Entry | undefined>(n);
  const sent = Promise.allSettled([
    known === undefined ? undefined : deps.read(pick(keys, known)),
    tryLocks(deps, triedKeys, token, ttlMs),
  ]);
  // Asked (a late-tagged fill may follow): the tag clock, sent in the same tick as the locks, so on
  // the same round trip; a failed read of it is NaN (that fill's value is then not stored). Sent
  // after them: a half-open breaker admits one trial call, which must be the read, not the clock
  // (else the read is refused and a stored response is answered as a miss, labelled coalesced).
  const clocked = clock ? deps.tagClock().catch(() => NaN) : undefined;
  const [read, locked] = await sent;
  const tagClock = clocked === undefined ? undefined : await clocked;
  let failure: unknown;
  let answered = false;
  // Positions whose part failed (their answers unknown, not misses), when the store says which.
  const failedAt: number[] = [];
  const failedIn = (result: PromiseSettledResult<unknown>, positions: readonly number[] | undefined) => {
    if (result.status === 'fulfilled') return;
    const reason: unknown = result.reason;
    const within = reason instanceof StorePartialError ? reason.failedAt : undefined;
    if (within === undefined) for (let j = 0; j < (positions?.length ?? n); j++) failedAt.push(positions?.[j] ?? j);
    else for (const j of within) failedAt.push(positions?.[j] ?? j);
  };
  if (known !== undefined) failedIn(read, known);
  failedIn(locked, known === undefined ? undefined : tried);
  const found = settled(read, (error) => (failure ??= error));
  if (found !== undefined && known !== undefined) {
    answered = true;
    for (let j = 0; j < known.length; j++) {
      const i = known[j]!;
      entries[i] = found[j];
      presence.sawKnown(keys[i]!, until[i]!, found[j]);
    }
  }
  const outcome = settled(locked, (error) => (failure = error));
  if (outcome !== undefined) {
    answered = true;
    for (let j = 0; j < tried.length; j++) {
      entries[tried[j]!] = outcome.entries[j];
      attempts[tried[j]!] = outcome.attempts[j];
    }
  }
  if (failure === undefined)
    return tagClock === undefined ? { entries, attempts, watch } : { entries, attempts, watch, clock: tagClock };
  if (!answered) {
    watch?.close();
    throw failure;
  }
  // Part answered (a Cluster master down, or one of the two calls failed): the caller uses that
  // part, and its watch (locks may have been won, waiters registered); the rest is read as missing.
  const message = `herdcache: redis readOrAcquire failed in part: ${(failure as Error | undefined)?.message ?? String(failure)}`;
  throw new StorePartialError(
    failure,
    { entries, attempts, watch, clock: tagClock } satisfies ReadAttempts,
    message,
    failedAt,
  );
}

/** A settled call's value, or its partial result when it failed in part; reports the failure. */
function settled<T>(result: PromiseSettledResult<T>, failed: (error: unknown) => void): T | undefined {
  if (result.status === 'fulfilled') return result.value;
  failed(result.reason);
  return result.reason instanceof StorePartialError ? (result.reason.partial as T) : undefined;
}

/** READ_OR_ACQUIRE for `keys` (one call, or one per hash slot in a Cluster). */
function tryLocks(deps: ReadOrLockDeps, keys: readonly string[], token: string, ttlMs: number): Promise<Tried> {
  deps.locking(token, ttlMs);
  const link = deps.link;
  const valueKeys = link.valueKeys(keys);
  const groups = link.slotGroups(valueKeys);
  const px = toPx(ttlMs);
  const binary = link.binary;
  const scripts = deps.scripts;
  const waiter = deps.waiterId();
  const send = (indices: number[] | null): Promise<(number | Raw)[]> => {
    const pairs = withLockKeys(valueKeys, indices);
    return binary
      ? scripts.herdcacheReadOrLock1Buffer(pairs.length, pairs, token, px, waiter)
      : scripts.herdcacheReadOrLock1(pairs.length, pairs, token, px, waiter);
  };
  const presence = link.presence;
  // A failed group's keys have neither entry nor attempt: the registry reads them as missing and
  // tries their locks with acquire.
  return link.call(
    'readOrAcquire',
    valueKeys,
    groups,
    send,
    (replies) => {
      const entries = new Array<Entry | undefined>(keys.length);
      const attempts = new Array<LockAttempt | undefined>(keys.length);
      for (let g = 0; g < replies.length; g++) {
        const reply = replies[g];
        if (reply === undefined) continue;
        const indices = groups === null ? null : groups[g]!;
        for (let j = 0; 2 * j < reply.length; j++) {
          const i = indices === null ? j : indices[j]!;
          const won = reply[2 * j];
          const raw = reply[2 * j + 1];
          if (won === -1) {
            // Found: read as getMany reads it (a bad payload is reported, once, here).
            const entry =
              raw === null || raw === undefined || typeof raw === 'number' ? undefined : link.decode(keys[i]!, raw);
            entries[i] = entry;
            presence.saw(keys[i]!, entry);
            continue;
          }
          presence.saw(keys[i]!, undefined);
          attempts[i] =
            won === 1
              ? { won: true, entry: undefined }
              : won === 0 || won === null || won === undefined
                ? { won: false, entry: undefined }
                : { won: false, entry: undefined, holder: typeof won === 'number' ? String(won) : won.toString() };
        }
      }
      return { entries, attempts };
    },
    {
      // The script ran after we gave up (Redis stalled): nobody fills under those locks, so release
      // them now that Redis answers, instead of letting every replica wait out lockTtl.
      onLate: (late, g) => deps.releaseLate(groups === null ? null : groups[g]!, keys, late as (number | Raw)[], token),
    },
  );
}

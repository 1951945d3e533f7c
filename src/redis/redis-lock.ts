/**
 * The Redis fill lock: one replica fills a key while the others wait for its value.
 *
 * Each step is one script call for the whole batch (in a Cluster: one per hash slot, in parallel):
 * try the locks and re-read the values; write the values fenced by the token and release; release
 * without writing. The scripts and why each step is atomic: scripts.ts. The fenced writes of every
 * fill that finishes in one turn of the event loop share one call. A lock attempt that finds a key
 * held registers its store as a waiter of it (when the store has a subscriber), and writes and
 * releases announce their keys to the registered waiters only: announcements.ts.
 */
import { StorePartialError } from '../core/errors';
import { WriteBatch } from './turn-sets';
import type { Entry } from '../core/freshness';
import type { FillLock, LockAttempt, LockWatch, ReadAttempts, StoreWrite } from '../core/store';
import type { FillAnnouncements } from './announcements';
import { announceChannel } from './fill-channels';
import { LOCK_SUFFIX, pick, withLockKeys } from './keys';
import { toPx, type Raw, type RedisLink } from './link';
import { readOrAcquire, type ReadOrLockDeps } from './read-or-lock';
import { ReleaseLedger } from './release-ledger';
import type { LockScripts } from './scripts';

const RELEASES = { releases: true } as const;

function noop(): void {}

export class RedisFillLock implements FillLock {
  readonly #link: RedisLink;
  readonly #scripts: LockScripts;
  #pending: WriteBatch | undefined;
  /** Releases of the last lockTtl, sent again when they failed or the client reconnected: release-ledger.ts. */
  readonly #ledger: ReleaseLedger;
  /** Only a store that hears announcements offers it: without it the registry just polls. */
  readonly watch: ((keys: readonly string[]) => LockWatch) | undefined;
  /** The id a lock attempt registers on keys held elsewhere ('': none, nothing would reach us). */
  readonly #waiterId: () => string;
  readonly #readOrLock: ReadOrLockDeps;
  /** Sends the store's unlocked writes gathered for the turn (turn-sets.ts), before anything of ours. */
  readonly #flushSets: () => void;

  /**
   * `read`: the store's getMany, the plain part of readOrAcquire; `tagClock`: the store's
   * (tag-clock.ts); `flushSets`: sends the store's gathered unlocked writes (turn-sets.ts).
   */
  constructor(
    link: RedisLink,
    scripts: LockScripts,
    announcements: FillAnnouncements | undefined,
    read: (keys: readonly string[]) => Promise<(Entry | undefined)[]>,
    tagClock: () => Promise<number>,
    flushSets: () => void,
  ) {
    this.#flushSets = flushSets;
    this.#link = link;
    this.#scripts = scripts;
    this.watch = announcements === undefined ? undefined : (keys) => announcements.watch(keys);
    this.#waiterId = announcements === undefined ? () => '' : () => announcements.waiterId();
    const ledger = (this.#ledger = new ReleaseLedger(
      (keys, token) => this.#release(keys, token),
      () => link.client.status === 'ready',
    ));
    link.guard.onReconnect = () => ledger.reconnected();
    this.#readOrLock = {
      link,
      scripts,
      read,
      tagClock,
      // No connection yet: nothing announced could reach this store (waiterId() is ''), so the
      // read registers nowhere and opens none; the lock step opens it if some key is held.
      watch: announcements === undefined ? undefined : (keys) => (announcements.opened ? this.watch!(keys) : undefined),
      waiterId: this.#waiterId,
      locking: (token, ttlMs) => {
        this.flushWrites();
        ledger.acquired(token, ttlMs);
      },
      releaseLate: (indices, keys, reply, token) => this.#releaseLate(indices, keys, reply, token),
    };
  }

  /** The read that also tries the locks of keys expected missing: read-or-lock.ts. */
  readOrAcquire(
    keys: readonly string[],
    lockable: readonly boolean[],
    token: string,
    ttlMs: number,
    clock?: boolean,
  ): Promise<ReadAttempts> {
    return readOrAcquire(this.#readOrLock, keys, lockable, token, ttlMs, clock === true);
  }

  /** Releases kept to be sent again (see release-ledger.ts): how many, how many still failing. */
  get unreleased(): { readonly releases: number; readonly failed: number } {
    return this.#ledger.pending;
  }

  async acquire(
    keys: readonly string[],
    token: string,
    ttlMs: number,
    refreshing?: readonly boolean[],
  ): Promise<LockAttempt[]> {
    const n = keys.length;
    if (n === 0) return [];
    this.flushWrites();
    this.#ledger.acquired(token, ttlMs);
    const link = this.#link;
    const valueKeys = link.valueKeys(keys);
    const groups = link.slotGroups(valueKeys);
    const px = toPx(ttlMs);
    const binary = link.binary;
    const scripts = this.#scripts;
    // Keys found held register this store as their waiter, in this same call: only then do their
    // holders' writes send a message, and only to the stores registered (announcements.ts).
    const waiter = this.#waiterId();
    // A background refresh that finds a value under another lock serves it: registered only if none.
    const send = (indices: number[] | null): Promise<(number | Raw)[]> => {
      const pairs = withLockKeys(valueKeys, indices);
      const flags = refreshFlags(refreshing, indices, waiter);
      return binary
        ? scripts.herdcacheLockAcquire3Buffer(pairs.length, pairs, token, px, waiter, flags)
        : scripts.herdcacheLockAcquire3(pairs.length, pairs, token, px, waiter, flags);
    };
    // A failed group's keys have no attempt (undefined): the registry fills them without the lock.
    return link.call(
      'lock.acquire',
      valueKeys,
      groups,
      send,
      (replies) => {
        const out = new Array<LockAttempt>(n);
        for (let g = 0; g < replies.length; g++) {
          const reply = replies[g];
          if (reply === undefined) continue;
          const indices = groups === null ? null : groups[g]!;
          for (let j = 0; 2 * j < reply.length; j++) {
            const i = indices === null ? j : indices[j]!;
            const raw = reply[2 * j + 1];
            // The registry read this key (getMany) before trying its lock, and that read reported
            // an undecodable payload: the re-check does not count it a second time.
            const entry =
              raw === null || raw === undefined || typeof raw === 'number' ? undefined : link.decodeAgain(raw);
            const won = reply[2 * j];
            // Lost: the holder's token when the script could read it (a string, or bytes in binary mode).
            out[i] =
              won === 1
                ? { won: true, entry }
                : won === 0 || won === null || won === undefined
                  ? { won: false, entry }
                  : { won: false, entry, holder: typeof won === 'number' ? String(won) : won.toString() };
          }
        }
        return out;
      },
      {
        // The script ran after we gave up (Redis stalled): nobody fills under those locks, so
        // release them now that Redis answers, instead of letting every replica wait out lockTtl.
        onLate: (late, g) =>
          this.#releaseLate(groups === null ? null : groups[g]!, keys, late as (number | Raw)[], token),
      },
    );
  }

  /**
   * Fenced writes are gathered for one turn of the event loop and sent as one script call (per
   * hash slot in a Cluster), flushed by setImmediate: the fills of one dispatch finish one by one
   * (a batch per loader, a call per getOrCompute key), and without this each would pay its own
   * round trip. Node drains the promise jobs between timer and I/O callbacks, so fills answered by
   * one burst of timers or database replies finish in separate checkpoints of one turn: a
   * microtask flush sent one script each, the check phase after them sends one for all. The wait
   * is the rest of the turn (the loop's own work, no timer): well under a millisecond. The
   * registry issues a write before it answers the fill's callers, and every other command of the
   * store (and close()) sends the pending writes first, so whatever those callers do next through
   * the store still reaches Redis after it.
   */
  writeAndRelease(writes: readonly StoreWrite[], token: string): Promise<boolean[]> {
    if (writes.length === 0) return Promise.resolve([]);
    // Unlocked writes issued before these go first (the order the registry issued them in): a
    // turn's writes gather while they are of one kind.
    this.#flushSets();
    // A failed write is released by the registry (release() below, which retries); one that landed
    // on a master lost right after is released again when the client reconnects.
    this.#ledger.sent(
      writes.map((write) => write.key),
      token,
    );
    let batch = this.#pending;
    if (batch === undefined) {
      batch = this.#pending = new WriteBatch();
      setImmediate(this.#flushPending);
    }
    return batch.add(writes, token);
  }

  /** Settles when the gathered writes are handed to the client (see FillLock.sent). */
  sent(): Promise<void> | undefined {
    return this.#pending?.sent;
  }

  /**
   * Sends the gathered writes now, fenced and unlocked (turn-sets.ts), if any: called before the
   * store's other commands, to keep their order. (One kind at most waits: adding one sends the other.)
   */
  flushWrites(): void {
    if (this.#pending !== undefined) this.#flushPending();
    this.#flushSets();
  }

  /** Sends the gathered fenced writes now, if any: before the store gathers unlocked ones. */
  flushLocked(): void {
    if (this.#pending !== undefined) this.#flushPending();
  }

  readonly #flushPending = (): void => {
    const batch = this.#pending;
    if (batch === undefined) return;
    this.#pending = undefined;
    // #send hands the script to the client before its first await: the writes are on the connection.
    this.#send(batch).then(
      (landed) => batch.settle(landed),
      (error: unknown) => batch.fail(error),
    );
    batch.markSent();
  };

  async #send(batch: WriteBatch): Promise<boolean[]> {
    const { writes, tokens } = batch;
    const n = writes.length;
    const link = this.#link;
    const valueKeys = new Array<string>(n);
    // Per write: token, payload, px. An unencodable value still releases its lock ('-1'), so the
    // other replicas stop waiting on it now instead of after the lock ttl.
    const args = new Array<string | Buffer>(3 * n);
    for (let i = 0; i < n; i++) {
      const write = writes[i]!;
      valueKeys[i] = link.valueKey(write.key);
      const payload = link.encode(write);
      args[3 * i] = tokens[i]!;
      args[3 * i + 1] = payload ?? '';
      args[3 * i + 2] = payload === undefined ? '-1' : String(link.px(write));
    }
    const groups = link.slotGroups(valueKeys);
    const scripts = this.#scripts;
    const send = (indices: number[] | null) => {
      const pairs = withLockKeys(valueKeys, indices);
      const [channel, sharded] = this.#announceOn(valueKeys[indices === null ? 0 : indices[0]!]!);
      return scripts.herdcacheLockWrite4(
        pairs.length,
        pairs,
        channel,
        sharded,
        indices === null ? args : pickTriples(args, indices),
      );
    };
    // A failed group's writes are undefined (not known to have landed, locks maybe still held).
    // Timed by what it sends: a large value takes longer than commandTimeout to move (see call-timeout.ts).
    const sending = link.sending(args);
    return link.call(
      'lock.writeAndRelease',
      valueKeys,
      groups,
      send,
      (replies) => {
        const out = new Array<boolean>(n);
        for (let g = 0; g < replies.length; g++) {
          const reply = replies[g];
          if (reply === undefined) continue;
          const indices = groups === null ? null : groups[g]!;
          for (let j = 0; j < reply.length; j++) out[indices === null ? j : indices[j]!] = reply[j] === 1;
        }
        // Landed: the next read of these keys is a plain MGET (presence.ts).
        for (let i = 0; i < n; i++) if (out[i] === true) link.presence.saw(writes[i]!.key, writes[i]!.entry);
        return out;
      },
      sending,
    );
  }

  async release(keys: readonly string[], token: string): Promise<void> {
    if (keys.length === 0) return;
    this.flushWrites();
    const sent = this.#ledger.sent(keys, token);
    try {
      await this.#release(keys, token);
    } catch (error) {
      // Not sent, the client not connected (a failover, a restart): sent once it is, while the lock may exist.
      if (notConnected(error)) this.#ledger.failed(sent);
      throw error;
    }
  }

  async #release(keys: readonly string[], token: string): Promise<void> {
    const n = keys.length;
    const link = this.#link;
    const lockKeys = new Array<string>(n);
    for (let i = 0; i < n; i++) lockKeys[i] = link.valueKey(keys[i]!) + LOCK_SUFFIX;
    const groups = link.slotGroups(lockKeys);
    const scripts = this.#scripts;
    // Never refused by the breaker: refusing it leaves a lock we may hold to expire by itself.
    const send = (indices: number[] | null) => {
      const batch = indices === null ? lockKeys : pick(lockKeys, indices);
      const [channel, sharded] = this.#announceOn(batch[0]!);
      return scripts.herdcacheLockRelease3(batch.length, batch, token, channel, sharded);
    };
    await link.call('lock.release', lockKeys, groups, send, noop, RELEASES);
  }

  /** The channel the scripts announce on, and whether it is a shard channel ('1'). */
  #announceOn(key: string): [string, string] {
    const link = this.#link;
    return [announceChannel(link, key), link.cluster ? '1' : '0'];
  }

  /** Releases the locks a timed-out acquire (one group of it) turned out to win: its late reply says which. */
  #releaseLate(
    indices: readonly number[] | null,
    keys: readonly string[],
    reply: (number | Raw)[],
    token: string,
  ): void {
    const won: string[] = [];
    for (let j = 0; 2 * j < reply.length; j++)
      if (reply[2 * j] === 1) won.push(keys[indices === null ? j : indices[j]!]!);
    if (won.length > 0) this.release(won, token).catch(noop);
  }
}

/**
 * ACQUIRE's per-key refresh flags ('1' a background refresh, '0' not: scripts.ts) for the keys of
 * one call (`indices`, null: all), or '' when none is or nothing registers anyway.
 */
function refreshFlags(refreshing: readonly boolean[] | undefined, indices: number[] | null, waiter: string): string {
  if (refreshing === undefined || waiter === '') return '';
  const n = indices === null ? refreshing.length : indices.length;
  let flags = '';
  let any = false;
  for (let j = 0; j < n; j++) {
    const flag = refreshing[indices === null ? j : indices[j]!] === true;
    any ||= flag;
    flags += flag ? '1' : '0';
  }
  return any ? flags : '';
}

/** The call was not sent because the client was not connected (in a Cluster: for some slot groups at least). */
function notConnected(error: unknown): boolean {
  const failure = error instanceof StorePartialError ? error.failure : error;
  return (failure as { code?: unknown } | null)?.code === 'E_STORE_UNAVAILABLE';
}

/** Items 3i, 3i+1, 3i+2 for each picked index: the per-key arguments of the write script. */
function pickTriples<T>(items: readonly T[], indices: readonly number[]): T[] {
  const out = new Array<T>(3 * indices.length);
  for (let j = 0; j < indices.length; j++) {
    const from = 3 * indices[j]!;
    out[3 * j] = items[from]!;
    out[3 * j + 1] = items[from + 1]!;
    out[3 * j + 2] = items[from + 2]!;
  }
  return out;
}

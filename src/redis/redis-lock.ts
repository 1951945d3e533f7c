/**
 * The Redis fill lock: one replica fills a key while the others wait for its value.
 *
 * Each step is one script call for the whole batch (in a Cluster: one per hash slot, in parallel):
 * try the locks and re-read the values; write the values fenced by the token and release; release
 * without writing. The scripts and why each step is atomic: scripts.ts.
 */
import type { FillLock, LockAttempt, StoreWrite } from '../core/store';
import { LOCK_SUFFIX, pick, pickPairs, withLockKeys } from './keys';
import { toPx, type Raw, type RedisLink } from './link';
import type { LockScripts } from './scripts';

const RELEASES = { releases: true } as const;

function noop(): void {}

export class RedisFillLock implements FillLock {
  readonly #link: RedisLink;
  readonly #scripts: LockScripts;

  constructor(link: RedisLink, scripts: LockScripts) {
    this.#link = link;
    this.#scripts = scripts;
  }

  async acquire(keys: readonly string[], token: string, ttlMs: number): Promise<LockAttempt[]> {
    const n = keys.length;
    if (n === 0) return [];
    const link = this.#link;
    const valueKeys = link.valueKeys(keys);
    const groups = link.slotGroups(valueKeys);
    const px = toPx(ttlMs);
    const binary = link.binary;
    const scripts = this.#scripts;
    const send = (indices: number[] | null): Promise<(number | Raw)[]> => {
      const pairs = withLockKeys(valueKeys, indices);
      return binary
        ? scripts.herdcacheLockAcquire1Buffer(pairs.length, pairs, token, px)
        : scripts.herdcacheLockAcquire1(pairs.length, pairs, token, px);
    };
    // A failed group's keys have no attempt (undefined): the registry fills them without the lock.
    return link.call('lock.acquire', valueKeys, groups, send, (replies) => {
      const out = new Array<LockAttempt>(n);
      for (let g = 0; g < replies.length; g++) {
        const reply = replies[g];
        if (reply === undefined) continue;
        const indices = groups === null ? null : groups[g]!;
        for (let j = 0; 2 * j < reply.length; j++) {
          const i = indices === null ? j : indices[j]!;
          const raw = reply[2 * j + 1];
          const entry = raw === null || raw === undefined || typeof raw === 'number' ? undefined : link.decode(keys[i]!, raw);
          out[i] = { won: reply[2 * j] === 1, entry };
        }
      }
      return out;
    }, {
      // The script ran after we gave up (Redis stalled): nobody fills under those locks, so
      // release them now that Redis answers, instead of letting every replica wait out lockTtl.
      onLate: (late, g) => this.#releaseLate(groups === null ? null : groups[g]!, keys, late as (number | Raw)[], token),
    });
  }

  async writeAndRelease(writes: readonly StoreWrite[], token: string): Promise<boolean[]> {
    const n = writes.length;
    if (n === 0) return [];
    const link = this.#link;
    const valueKeys = new Array<string>(n);
    // Per write: payload then px. An unencodable value still releases its lock ('-1'), so the
    // other replicas stop waiting on it now instead of after the lock ttl.
    const args = new Array<string | Buffer>(2 * n);
    for (let i = 0; i < n; i++) {
      const write = writes[i]!;
      valueKeys[i] = link.valueKey(write.key);
      const payload = link.encode(write);
      args[2 * i] = payload ?? '';
      args[2 * i + 1] = payload === undefined ? '-1' : String(link.px(write));
    }
    const groups = link.slotGroups(valueKeys);
    const scripts = this.#scripts;
    const send = (indices: number[] | null) => {
      const pairs = withLockKeys(valueKeys, indices);
      return scripts.herdcacheLockWrite1(pairs.length, pairs, token, indices === null ? args : pickPairs(args, indices));
    };
    // A failed group's writes are undefined (not known to have landed, locks maybe still held).
    return link.call('lock.writeAndRelease', valueKeys, groups, send, (replies) => {
      const out = new Array<boolean>(n);
      for (let g = 0; g < replies.length; g++) {
        const reply = replies[g];
        if (reply === undefined) continue;
        const indices = groups === null ? null : groups[g]!;
        for (let j = 0; j < reply.length; j++) out[indices === null ? j : indices[j]!] = reply[j] === 1;
      }
      return out;
    });
  }

  async release(keys: readonly string[], token: string): Promise<void> {
    const n = keys.length;
    if (n === 0) return;
    const link = this.#link;
    const lockKeys = new Array<string>(n);
    for (let i = 0; i < n; i++) lockKeys[i] = link.valueKey(keys[i]!) + LOCK_SUFFIX;
    const groups = link.slotGroups(lockKeys);
    const scripts = this.#scripts;
    // Never refused by the breaker: refusing it leaves a lock we may hold to expire by itself.
    const send = (indices: number[] | null) => {
      const batch = indices === null ? lockKeys : pick(lockKeys, indices);
      return scripts.herdcacheLockRelease1(batch.length, batch, token);
    };
    await link.call('lock.release', lockKeys, groups, send, noop, RELEASES);
  }

  /** Releases the locks a timed-out acquire (one group of it) turned out to win: its late reply says which. */
  #releaseLate(indices: readonly number[] | null, keys: readonly string[], reply: (number | Raw)[], token: string): void {
    const won: string[] = [];
    for (let j = 0; 2 * j < reply.length; j++) if (reply[2 * j] === 1) won.push(keys[indices === null ? j : indices[j]!]!);
    if (won.length > 0) this.release(won, token).catch(noop);
  }
}

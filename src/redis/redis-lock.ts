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
    const replies = await link.guard.run(
      'lock.acquire',
      () => link.perGroup(groups, (indices): Promise<(number | Raw)[]> => {
        const pairs = withLockKeys(valueKeys, indices);
        return binary
          ? scripts.herdcacheLockAcquire1Buffer(pairs.length, pairs, token, px)
          : scripts.herdcacheLockAcquire1(pairs.length, pairs, token, px);
      }),
      // The script ran after we gave up (Redis stalled): nobody fills under those locks, so
      // release them now that Redis answers, instead of letting every replica wait out lockTtl.
      { onLate: (late) => this.#releaseLate(keys, groups, late as (number | Raw)[][], token) },
    );
    const out = new Array<LockAttempt>(n);
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; 2 * j < reply.length; j++) {
        const i = indices === null ? j : indices[j]!;
        const raw = reply[2 * j + 1];
        const entry = raw === null || raw === undefined || typeof raw === 'number' ? undefined : link.decode(keys[i]!, raw);
        out[i] = { won: reply[2 * j] === 1, entry };
      }
    }
    return out;
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
    const replies = await link.guard.run('lock.writeAndRelease', () => link.perGroup(groups, (indices) => {
      const pairs = withLockKeys(valueKeys, indices);
      return scripts.herdcacheLockWrite1(pairs.length, pairs, token, indices === null ? args : pickPairs(args, indices));
    }));
    const out = new Array<boolean>(n);
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; j < reply.length; j++) out[indices === null ? j : indices[j]!] = reply[j] === 1;
    }
    return out;
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
    await link.guard.run('lock.release', () => link.perGroup(groups, (indices) => {
      const batch = indices === null ? lockKeys : pick(lockKeys, indices);
      return scripts.herdcacheLockRelease1(batch.length, batch, token);
    }), RELEASES);
  }

  /** Releases the locks a timed-out acquire turned out to win (its late reply says which). */
  #releaseLate(keys: readonly string[], groups: number[][] | null, replies: (number | Raw)[][], token: string): void {
    const won: string[] = [];
    for (let g = 0; g < replies.length; g++) {
      const indices = groups === null ? null : groups[g]!;
      const reply = replies[g]!;
      for (let j = 0; 2 * j < reply.length; j++) if (reply[2 * j] === 1) won.push(keys[indices === null ? j : indices[j]!]!);
    }
    if (won.length > 0) this.release(won, token).catch(noop);
  }
}

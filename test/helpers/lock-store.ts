/**
 * An in-process stand-in for a shared store with fill locks, to test the REGISTRY's lock
 * protocol (poll, backoff, deadline, re-check, fenced write) deterministically with a manual
 * clock. Two caches given the same LockingStore behave like two replicas. Redis's own behaviour
 * (SET NX PX, scripts) is tested against a real redis-server in test/redis/, never here.
 */
import type { Clock, Entry, FillLock, LockAttempt, Store, StoreWrite } from '../../src/core';
import { memoryStore } from '../../src/core';

export class LockingStore implements Store {
  readonly name = 'locking';
  readonly entries = memoryStore();
  readonly locks = new Map<string, { token: string; until: number }>();
  readonly log: string[] = [];
  failAcquire = false;
  /** The lock script runs, then the call fails anyway (a reply later than the command timeout). */
  timeOutAfterAcquire = false;
  failWrite = false;
  readonly lock: FillLock;

  constructor(private readonly clock: Clock) {
    this.lock = {
      acquire: async (keys, token, ttlMs): Promise<LockAttempt[]> => {
        this.log.push(`acquire ${keys.join(',')}`);
        if (this.failAcquire) throw new Error('store unreachable');
        const now = this.clock.now();
        const attempts = keys.map((key) => {
          const held = this.locks.get(key);
          let won = false;
          if (held === undefined || held.until <= now) {
            this.locks.set(key, { token, until: now + ttlMs });
            won = true;
          }
          return { won, entry: this.entries.getSync(key) };
        });
        if (this.timeOutAfterAcquire) throw new Error('command timed out (the script ran anyway)');
        return attempts;
      },
      writeAndRelease: async (writes, token) => {
        this.log.push(`writeAndRelease ${writes.map((w) => w.key).join(',')}`);
        if (this.failWrite) throw new Error('store unreachable');
        const now = this.clock.now();
        return writes.map((w) => {
          const held = this.locks.get(w.key);
          if (held === undefined || held.token !== token || held.until <= now) return false;
          this.entries.getSync(w.key); // keep LRU order realistic
          void this.entries.setMany([w]);
          this.locks.delete(w.key);
          return true;
        });
      },
      release: async (keys, token) => {
        this.log.push(`release ${keys.join(',')}`);
        for (const key of keys) if (this.locks.get(key)?.token === token) this.locks.delete(key);
      },
    };
  }

  async getMany(keys: readonly string[]): Promise<(Entry | undefined)[]> {
    return keys.map((key) => this.entries.getSync(key));
  }

  async setMany(writes: readonly StoreWrite[]): Promise<void> {
    this.log.push(`setMany ${writes.map((w) => w.key).join(',')}`);
    await this.entries.setMany(writes);
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.locks.delete(key);
    await this.entries.delete(keys);
  }

  async clear(): Promise<void> {
    this.locks.clear();
    await this.entries.clear();
  }

  /** Another process holds the lock of `key` (and may never write). */
  holdLock(key: string, ms: number, token = 'someone-else'): void {
    this.locks.set(key, { token, until: this.clock.now() + ms });
  }
}

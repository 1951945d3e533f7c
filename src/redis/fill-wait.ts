/**
 * One pipeline's watch over the keys it waits on (LockWatch): a wait that the holder's announcement
 * ends before the poll's sleep, and the values announced with their writes, kept for the next
 * attempt to answer from instead of re-reading them (announcements.ts says when a message carries one).
 */
import type { Entry } from '../core/freshness';
import type { LockWatch } from '../core/store';

/** What a wait needs from the announcements it belongs to. */
export interface WaitOwner {
  woken: number;
  polled: number;
  deaf: number;
  /** Whether announcements on every one of `channels` reach this process now. */
  hears(channels: ReadonlySet<string>): boolean;
  forget(wait: Wait, keys: readonly string[]): void;
  /** Routes the announcements of `keys` (cache keys) to `wait` too (it calls track()). */
  add(wait: Wait, keys: readonly string[]): void;
  /** The full Redis value key of a cache key, as announcements name it. */
  fullKey(key: string): string;
}

export class Wait implements LockWatch {
  readonly #owner: WaitOwner;
  /** Full keys watched, and the channels their announcements come on. */
  readonly #keys: string[] = [];
  readonly #channels = new Set<string>();
  /** An announcement came since the last wait ended (it may concern a key no longer waited on). */
  #announced = false;
  #wake: (() => void) | undefined;
  #closed = false;
  /** Full key → the entry its write announced and that write's lock token, until taken. */
  #entries: Map<string, { entry: Entry; token: string }> | undefined;

  constructor(owner: WaitOwner) {
    this.#owner = owner;
  }

  /** Watches `keys` (cache keys) too: see LockWatch.add. */
  add(keys: readonly string[]): void {
    if (!this.#closed) this.#owner.add(this, keys);
  }

  /** Called by the owner as it routes `keys` (full keys) on `channels` to this wait. */
  track(keys: readonly string[], channels: ReadonlySet<string>): void {
    for (const key of keys) this.#keys.push(key);
    for (const channel of channels) this.#channels.add(channel);
  }

  /** `key` was written (with `entry` under the lock `token`, when the message carried them) or released. */
  announce(key?: string, entry?: Entry, token?: string): void {
    if (key !== undefined && entry !== undefined && token !== undefined && !this.#closed)
      (this.#entries ??= new Map()).set(key, { entry, token });
    const wake = this.#wake;
    if (wake === undefined) this.#announced = true;
    else wake();
  }

  take(key: string, holder: string): Entry | undefined {
    const entries = this.#entries;
    if (entries === undefined) return undefined;
    const full = this.#owner.fullKey(key);
    const announced = entries.get(full);
    if (announced === undefined) return undefined;
    entries.delete(full);
    // Written under the lock the caller's last attempt found: after that attempt, so within its load.
    return announced.token === holder ? announced.entry : undefined;
  }

  wait(sleep: Promise<void>): Promise<void> {
    const owner = this.#owner;
    if (this.#announced || this.#closed) {
      // Heard while the last lock attempt was in flight: try again now. The sleep is left to run out.
      this.#announced = false;
      if (!this.#closed) owner.woken++;
      return Promise.resolve();
    }
    if (!owner.hears(this.#channels)) owner.deaf++;
    return new Promise<void>((resolve) => {
      let done = false;
      this.#wake = () => {
        if (done) return;
        done = true;
        this.#wake = undefined;
        owner.woken++;
        resolve();
      };
      sleep.then(() => {
        if (done) return;
        done = true;
        this.#wake = undefined;
        owner.polled++;
        resolve();
      }, resolve);
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#entries = undefined;
    this.#owner.forget(this, this.#keys);
  }
}

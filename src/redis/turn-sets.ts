/**
 * The writes of one event-loop turn, gathered and sent in one call: the fenced writes of locked
 * fills (WriteBatch, sent by RedisFillLock.writeAndRelease, which says why a turn), and the
 * unlocked ones (TurnSets: redis-store's setMany of fills made without the lock, `lock: false` or
 * the lockless gap after lockWaitTimeout), which finish one by one as well and each paid a
 * pipeline of its own. Flushed by setImmediate, or before any other
 * command of the store (so a command issued after a write reaches Redis after it); the registry
 * answers a fill's callers once `sent()` settles, so what they do next comes after the write too.
 */
import { StorePartialError } from '../core/errors';
import type { StoreWrite } from '../core/store';

function noop(): void {}

interface Pending {
  readonly writes: StoreWrite[];
  /** Each caller's writes: `writes[start, start + count)`. */
  readonly callers: { start: number; count: number; resolve: () => void; reject: (error: unknown) => void }[];
  /** Settles when the writes are handed to the client (Store.writesSent). */
  readonly sent: Promise<void>;
  markSent: () => void;
}

export class TurnSets {
  #pending: Pending | undefined;
  readonly #send: (writes: readonly StoreWrite[]) => Promise<void>;

  /** `send`: the store's one call for the writes gathered (its first step hands them to the client, synchronously). */
  constructor(send: (writes: readonly StoreWrite[]) => Promise<void>) {
    this.#send = send;
  }

  add(writes: readonly StoreWrite[]): Promise<void> {
    let pending = this.#pending;
    if (pending === undefined) {
      let markSent = (): void => {};
      const sent = new Promise<void>((resolve) => (markSent = resolve));
      pending = this.#pending = { writes: [], callers: [], sent, markSent };
      setImmediate(this.flush);
    }
    const start = pending.writes.length;
    for (const write of writes) pending.writes.push(write);
    const callers = pending.callers;
    return new Promise<void>((resolve, reject) => callers.push({ start, count: writes.length, resolve, reject }));
  }

  /** Settles once the writes gathered so far are on the connection; undefined when none wait. Never rejects. */
  sent(): Promise<void> | undefined {
    return this.#pending?.sent;
  }

  /** Sends the gathered writes now, if any. */
  readonly flush = (): void => {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    let sending: Promise<void>;
    try {
      sending = this.#send(pending.writes);
    } catch (error) {
      sending = Promise.reject(error);
    }
    sending.then(
      () => {
        for (const caller of pending.callers) caller.resolve();
      },
      (error: unknown) => {
        // Failed on some Cluster masters only (positions in the writes): a caller none of whose
        // writes went there is answered as if it had been sent alone.
        const failed = error instanceof StorePartialError ? error.failedAt : undefined;
        const lost = failed === undefined ? undefined : new Set(failed);
        for (const caller of pending.callers) {
          let hit = lost === undefined;
          for (let i = caller.start; !hit && i < caller.start + caller.count; i++) hit = lost!.has(i);
          if (hit) caller.reject(error);
          else caller.resolve();
        }
      },
    );
    pending.markSent();
  };
}

/** The fenced writes of one turn of the event loop, from every caller, and their callers' shares. */
export class WriteBatch {
  readonly writes: StoreWrite[] = [];
  readonly tokens: string[] = [];
  /** Settles when the batch is handed to the client (FillLock.sent). */
  readonly sent: Promise<void>;
  markSent: () => void = noop;

  constructor() {
    this.sent = new Promise((resolve) => {
      this.markSent = resolve;
    });
  }
  readonly #callers: {
    start: number;
    count: number;
    resolve: (landed: boolean[]) => void;
    reject: (error: unknown) => void;
  }[] = [];

  add(writes: readonly StoreWrite[], token: string): Promise<boolean[]> {
    const start = this.writes.length;
    for (const write of writes) {
      this.writes.push(write);
      this.tokens.push(token);
    }
    return new Promise((resolve, reject) => this.#callers.push({ start, count: writes.length, resolve, reject }));
  }

  settle(landed: boolean[]): void {
    for (const caller of this.#callers) caller.resolve(landed.slice(caller.start, caller.start + caller.count));
  }

  fail(error: unknown): void {
    // Failed on some Cluster masters only: each caller gets the outcome of its own writes.
    if (error instanceof StorePartialError) {
      const landed = error.partial as (boolean | undefined)[];
      for (const caller of this.#callers) {
        caller.reject(
          new StorePartialError(error.failure, landed.slice(caller.start, caller.start + caller.count), error.message),
        );
      }
      return;
    }
    for (const caller of this.#callers) caller.reject(error);
  }
}

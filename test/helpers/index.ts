/** Test helpers: deferred promises, counting fills, a store wrapper that counts calls, tick flushing. */
import type { Entry, Store, StoreWrite } from '../../src/core';

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets queued promise jobs, next ticks and the registry's dispatch run. */
export async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Wraps a store and counts each call (and the keys read), for "one read per tick" assertions. */
export function countingStore<S extends Store>(inner: S) {
  const calls = { getMany: 0, getManyKeys: [] as string[][], setMany: 0, delete: 0, clear: 0 };
  const store: Store = {
    name: `counting(${inner.name})`,
    getSync: inner.getSync?.bind(inner),
    getMany(keys: readonly string[]) {
      calls.getMany++;
      calls.getManyKeys.push([...keys]);
      return inner.getMany(keys);
    },
    setMany(writes: readonly StoreWrite[]) {
      calls.setMany++;
      return inner.setMany(writes);
    },
    delete(keys: readonly string[]) {
      calls.delete++;
      return inner.delete(keys);
    },
    clear() {
      calls.clear++;
      return inner.clear();
    },
    // The read that also tries locks (FillLock.readOrAcquire) is the store read: counted as one.
    lock:
      inner.lock?.readOrAcquire === undefined
        ? inner.lock
        : {
            ...inner.lock,
            watch: inner.lock.watch,
            acquire: inner.lock.acquire.bind(inner.lock),
            writeAndRelease: inner.lock.writeAndRelease.bind(inner.lock),
            release: inner.lock.release.bind(inner.lock),
            sent: inner.lock.sent?.bind(inner.lock),
            readOrAcquire(keys, lockable, token, ttlMs, clock) {
              calls.getMany++;
              calls.getManyKeys.push([...keys]);
              return inner.lock!.readOrAcquire!(keys, lockable, token, ttlMs, clock);
            },
          },
    bind: inner.bind?.bind(inner),
  };
  return { store, calls, inner };
}

/** Same as countingStore but hides getSync, so the registry takes its asynchronous-store path. */
export function asyncStore<S extends Store>(inner: S) {
  const counting = countingStore(inner);
  const { getSync: _ignored, ...rest } = counting.store;
  void _ignored;
  return { ...counting, store: rest as Store };
}

export function entry<V>(value: V, freshUntil = Infinity, staleUntil = freshUntil): Entry<V> {
  return { value, freshUntil, staleUntil };
}

/** A process warning a test captured (see captureWarnings). */
export interface CapturedWarning {
  message: string;
  code: string | undefined;
}

/**
 * Captures each test's process.emitWarning calls (nothing printed): the returned array holds the
 * current test's, emptied before each test. Call at the top of a file or a describe block.
 */
export function captureWarnings(): CapturedWarning[] {
  const warnings: CapturedWarning[] = [];
  let spy: jest.SpyInstance | undefined;
  beforeEach(() => {
    warnings.length = 0;
    spy = jest.spyOn(process, 'emitWarning').mockImplementation(((warning: string | Error, options?: unknown) => {
      const code = typeof options === 'object' && options !== null ? (options as { code?: string }).code : undefined;
      warnings.push({ message: String(warning), code });
    }) as typeof process.emitWarning);
  });
  afterEach(() => spy?.mockRestore());
  return warnings;
}

/**
 * Each test's unhandled rejections: `unhandled()` after `settled()` (a dropped rejection is
 * reported once the microtask queue has drained). Call at the top of a file.
 */
export function watchUnhandledRejections(): { unhandled(): unknown[]; settled(): Promise<void> } {
  let reasons: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void reasons.push(reason);
  beforeEach(() => {
    reasons = [];
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });
  return {
    unhandled: () => reasons,
    settled: async () => {
      await flush();
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setTimeout(resolve, 5));
    },
  };
}

/** An async callback that rejects: what an async function given where a synchronous one is asked returns. */
export const rejecting = (what: string) => async (): Promise<never> => {
  throw new Error(`${what} rejected`);
};

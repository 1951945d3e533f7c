/**
 * tracedStore(): the same store, with a span around every call that goes to it. A proxy, so
 * everything else the store has (a tiered store's stats(), a Redis store's breakerState) stays
 * reachable, and the synchronous read (getSync: the hit path of memory and tiered L1) is the
 * store's own method, untouched.
 */
import type { Tracer } from '@opentelemetry/api';
import { invalidArgument } from '../core/errors';
import type { FillLock, Store } from '../core/store';
import { type TracingOptions, tracedCall, tracerOf } from './tracing';

const KEYED = ['getMany', 'delete'] as const;
const WRITES = ['setMany'] as const;
const TAGGED = ['invalidateTags', 'tagVersions'] as const;

/**
 * Wraps `store` so each call makes a span `herdcache.store.<operation>` (getMany, setMany, delete,
 * clear, invalidateTags, tagVersions, tagClock, tagVersionsSince, lock.acquire, lock.readOrAcquire,
 * lock.writeAndRelease, lock.release) with
 * `herdcache.store` (the store's name) and `herdcache.keys` (or `herdcache.tags`), a child of the
 * active span (the fill's, or the resolver's for the read that precedes a fill).
 */
export function tracedStore<S extends Store>(store: S, options?: TracingOptions): S {
  if (store === null || typeof store !== 'object' || typeof store.getMany !== 'function')
    throw invalidArgument('store', store, 'a Store (memoryStore(), redisStore(...), tieredStore(...))');
  const tracer = tracerOf(options, 'tracedStore()');
  const name = store.name;
  const own = new Map<PropertyKey, unknown>();
  for (const method of KEYED) {
    const fn = store[method].bind(store) as (keys: readonly string[]) => Promise<unknown>;
    own.set(method, (keys: readonly string[]) =>
      tracedCall(tracer, method, { 'herdcache.store': name, 'herdcache.keys': keys.length }, () => fn(keys)),
    );
  }
  for (const method of WRITES) {
    const fn = store[method].bind(store);
    own.set(method, (writes: Parameters<Store['setMany']>[0]) =>
      tracedCall(tracer, method, { 'herdcache.store': name, 'herdcache.keys': writes.length }, () => fn(writes)),
    );
  }
  for (const method of TAGGED) {
    const original = store[method];
    if (typeof original !== 'function') continue;
    const fn = original.bind(store) as (tags: readonly string[]) => Promise<unknown>;
    own.set(method, (tags: readonly string[]) =>
      tracedCall(tracer, method, { 'herdcache.store': name, 'herdcache.tags': tags.length }, () => fn(tags)),
    );
  }
  const { tagClock, tagVersionsSince } = store;
  if (typeof tagClock === 'function')
    own.set('tagClock', () => tracedCall(tracer, 'tagClock', { 'herdcache.store': name }, () => tagClock.call(store)));
  if (typeof tagVersionsSince === 'function') {
    own.set('tagVersionsSince', (tags: readonly string[], since: number) =>
      tracedCall(tracer, 'tagVersionsSince', { 'herdcache.store': name, 'herdcache.tags': tags.length }, () =>
        tagVersionsSince.call(store, tags, since),
      ),
    );
  }
  const clear = store.clear.bind(store);
  own.set('clear', () => tracedCall(tracer, 'clear', { 'herdcache.store': name }, clear));
  if (store.lock !== undefined) own.set('lock', tracedLock(store.lock, tracer, name));
  // Methods the store calls on itself keep the store as `this` (private fields need it).
  return proxied(store, Object.fromEntries(own) as Partial<S>);
}

/**
 * The lock with a span around each call to the store: acquire, readOrAcquire, writeAndRelease,
 * release. Its other members (watch, sent: no call of their own) are the lock's, as they are:
 * a traced store keeps its wake-ups, its one-round-trip cold read and its write batching.
 */
function tracedLock(lock: FillLock, tracer: Tracer, store: string): FillLock {
  const own: Partial<FillLock> = {
    acquire: (keys, token, ttlMs, refreshing) =>
      tracedCall(tracer, 'lock.acquire', { 'herdcache.store': store, 'herdcache.keys': keys.length }, () =>
        lock.acquire(keys, token, ttlMs, refreshing),
      ),
    writeAndRelease: (writes, token) =>
      tracedCall(tracer, 'lock.writeAndRelease', { 'herdcache.store': store, 'herdcache.keys': writes.length }, () =>
        lock.writeAndRelease(writes, token),
      ),
    release: (keys, token) =>
      tracedCall(tracer, 'lock.release', { 'herdcache.store': store, 'herdcache.keys': keys.length }, () =>
        lock.release(keys, token),
      ),
  };
  const readOrAcquire = lock.readOrAcquire;
  if (typeof readOrAcquire === 'function') {
    own.readOrAcquire = (keys, lockable, token, ttlMs, clock) =>
      tracedCall(tracer, 'lock.readOrAcquire', { 'herdcache.store': store, 'herdcache.keys': keys.length }, () =>
        readOrAcquire.call(lock, keys, lockable, token, ttlMs, clock),
      );
  }
  return proxied(lock, own);
}

/** `target` with `own`'s members in place of its own; every other method bound to `target` (private fields need it). */
function proxied<T extends object>(target: T, own: Partial<T>): T {
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(target, {
    get(object, property) {
      if (Object.prototype.hasOwnProperty.call(own, property)) return own[property as keyof T];
      const value: unknown = Reflect.get(object, property, object);
      if (typeof value !== 'function') return value;
      let fn = bound.get(property);
      if (fn === undefined) {
        fn = (value as (...args: unknown[]) => unknown).bind(object);
        bound.set(property, fn);
      }
      return fn;
    },
  });
}

/**
 * The embedded default: an in-process LRU (lru-cache) holding entry objects as they are.
 *
 * Hits do not serialize: the entry object is returned by reference, so a caller that mutates a
 * cached value mutates it for everyone (as with DataLoader). Freshness and grace live in the
 * entry and are judged by the registry's clock, so lru-cache's own TTL timers are not used:
 * an entry past its grace is ignored on read and overwritten by the next fill, and memory is
 * bounded by `max` entries.
 */
import { LRUCache } from 'lru-cache';
import { invalidArgument, invalidOption } from './errors';
import { checkKnownKeys, givenOr, optionNames } from './options';
import type { Entry } from './freshness';
import type { Store, StoreWrite } from './store';

export interface MemoryStoreOptions {
  /** Most entries kept; the least recently used is evicted first. Default 10000. */
  max?: number;
}

export const MEMORY_STORE_DEFAULT_MAX = 10_000;
const MEMORY_STORE_OPTIONS = optionNames<MemoryStoreOptions>({ max: true });

const done: Promise<void> = Promise.resolve();

/** lru-cache's get options, shared by every read (it only ever sets `status` on it, to undefined here). */
const READ: LRUCache.GetOptions<string, Entry, unknown> = {};

export class MemoryStore implements Store {
  readonly name = 'memory';
  readonly #lru: LRUCache<string, Entry>;
  /** tag → keys of the entries carrying it; kept in step with the LRU, so bounded by `max`. */
  readonly #byTag = new Map<string, Set<string>>();

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    checkKnownKeys('memoryStore()', options, MEMORY_STORE_OPTIONS);
    const max = givenOr(options.max, MEMORY_STORE_DEFAULT_MAX);
    if (!Number.isSafeInteger(max) || max < 1) throw invalidOption('max', max, 'a positive integer');
    this.#lru = new LRUCache<string, Entry>({
      max,
      // Evicted, deleted or overwritten: the entry leaves the tag index with it.
      dispose: (entry, key) => {
        if (entry.tags !== undefined) this.#unindex(key, entry.tags);
      },
    });
  }

  /** Number of distinct tags indexed (for leak checks). */
  get tagCount(): number {
    return this.#byTag.size;
  }

  /** Number of entries held (including stale ones not yet overwritten or evicted). */
  get size(): number {
    return this.#lru.size;
  }

  getSync(key: string): Entry | undefined {
    // One options object for every read: lru-cache's get otherwise makes one per call.
    return this.#lru.get(key, READ);
  }

  getMany(keys: readonly string[]): Promise<(Entry | undefined)[]> {
    const out = new Array<Entry | undefined>(keys.length);
    for (let i = 0; i < keys.length; i++) out[i] = this.#lru.get(keys[i]!);
    return Promise.resolve(out);
  }

  // Writes and deletes take effect synchronously, before the returned promise: the registry
  // relies on that so a value is visible to the next caller the moment its flight settles.
  setMany(writes: readonly StoreWrite[]): Promise<void> {
    for (const w of writes) {
      this.#lru.set(w.key, w.entry);
      const tags = w.entry.tags;
      if (tags !== undefined) {
        for (const tag of tags) {
          let keys = this.#byTag.get(tag);
          if (keys === undefined) this.#byTag.set(tag, (keys = new Set()));
          keys.add(w.key);
        }
      }
    }
    return done;
  }

  /** In one process a tag's entries can simply be deleted; the registry abandons fills in flight. */
  invalidateTags(tags: readonly string[]): Promise<void> {
    for (const tag of tags) {
      const keys = this.#byTag.get(tag);
      if (keys === undefined) continue;
      for (const key of [...keys]) this.#lru.delete(key);
      this.#byTag.delete(tag);
    }
    return done;
  }

  #unindex(key: string, tags: readonly string[]): void {
    for (const tag of tags) {
      const keys = this.#byTag.get(tag);
      if (keys === undefined) continue;
      keys.delete(key);
      if (keys.size === 0) this.#byTag.delete(tag);
    }
  }

  delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.#lru.delete(key);
    return done;
  }

  clear(): Promise<void> {
    this.#lru.clear();
    return done;
  }
}

/** The in-process store: bounded LRU, no serialization. */
export function memoryStore(options?: MemoryStoreOptions): MemoryStore {
  return new MemoryStore(options);
}

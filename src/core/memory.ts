/**
 * The embedded default: an in-process LRU (lru-cache) holding entry objects as they are.
 *
 * Hits do not serialize: the entry object is returned by reference, so a caller that mutates a
 * cached value mutates it for everyone (as with DataLoader). Freshness and grace live in the
 * entry and are judged by the registry's clock, so lru-cache's own TTL timers are not used:
 * an entry past its grace is ignored on read and overwritten by the next fill.
 *
 * Memory is bounded twice: by `max` entries and by `maxSize` estimated bytes (key, tags and value,
 * estimated once when the entry is written: see ./sizes). An entry larger than `maxEntrySize` is
 * not stored at all (counted in `oversized`): the next caller fills again. Keys reach the store
 * already bounded (long keys are digests, see ./long-keys); tags are indexed by their bounded form.
 *
 * The tag index (tag → keys) is appended to, not kept exact, and in batches: a whole response
 * carries ~40 tags, and a Set per tag, updated at each write, cost ~0.3-0.9 µs per tag (most of a
 * response miss's store write: each tag's record is a cache miss by then). So a write is noted
 * (its key and tags, as written: the entry's array may be the caller's, changed later) and the
 * notes are indexed TAG_BATCH writes at a time, when the records are warm, and always before
 * invalidateTags reads the index. A tag's list may name keys twice, or keys whose entry is gone or
 * no longer carries the tag; invalidateTags deletes only the keys whose held entry was written
 * with it, and a list is compacted once it is more than twice the entries carrying the tag (so the
 * index stays bounded by the entries held).
 */
import { LRUCache } from 'lru-cache';
import { invalidArgument, invalidOption } from './errors';
import { checkKnownKeys, givenOr, optionNames } from './options';
import type { Entry } from './freshness';
import { boundedKey } from './long-keys';
import { entrySize } from './sizes';
import type { Store, StoreWrite } from './store';

export interface MemoryStoreOptions {
  /** Most entries kept; the least recently used is evicted first. Default 10000. */
  max?: number;
  /**
   * Most bytes kept, estimated (key, tags and value; see docs/core.md): the least recently used
   * entries are evicted first to make room. Default 64 MiB.
   */
  maxSize?: number;
  /** An entry estimated larger than this is not stored (counted in `oversized`). Default maxSize / 8. */
  maxEntrySize?: number;
}

export const MEMORY_STORE_DEFAULT_MAX = 10_000;
export const MEMORY_STORE_DEFAULT_MAX_SIZE = 64 * 1024 * 1024;
const MEMORY_STORE_OPTIONS = optionNames<MemoryStoreOptions>({ max: true, maxSize: true, maxEntrySize: true });

const done: Promise<void> = Promise.resolve();

/** lru-cache's get options, shared by every read (it only ever sets `status` on it, to undefined here). */
const READ: LRUCache.GetOptions<string, Entry, unknown> = {};

/** A list this much longer than twice its live count is compacted (so short lists never are). */
const TAG_SLACK = 16;
/** Writes noted before they are indexed together (~1 ms of indexing at most, for ~40 tags each). */
const TAG_BATCH = 256;

/**
 * One tag's index: every key written with the tag since the last compaction (a superset of the
 * keys whose entry carries it now), and how many held entries carry it.
 */
interface TagKeys {
  keys: string[];
  live: number;
}

/** A held tagged entry: its tags as written (bounded forms), and whether the index has them yet. */
interface Written {
  readonly key: string;
  /** Not the entry: a note outlives an entry disposed before its batch, and must not hold its value. */
  readonly tags: readonly string[];
  /** In the index (counted in `live`); false: still noted, or disposed before it was indexed. */
  indexed: boolean;
  disposed: boolean;
}

export class MemoryStore implements Store {
  readonly name = 'memory';
  readonly #lru: LRUCache<string, Entry>;
  /** tag → the keys written with it; `live` kept in step with the LRU, so bounded by `max`. */
  readonly #byTag = new Map<string, TagKeys>();
  /** key → its held entry's tags as written, for the tagged entries only. */
  readonly #written = new Map<string, Written>();
  /** Written and not indexed yet (at most TAG_BATCH between two writes). */
  #noted: Written[] = [];
  readonly #maxEntrySize: number;
  #oversized = 0;

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    checkKnownKeys('memoryStore()', options, MEMORY_STORE_OPTIONS);
    const max = givenOr(options.max, MEMORY_STORE_DEFAULT_MAX);
    if (!Number.isSafeInteger(max) || max < 1) throw invalidOption('max', max, 'a positive integer');
    const maxSize = givenOr(options.maxSize, MEMORY_STORE_DEFAULT_MAX_SIZE);
    if (!Number.isSafeInteger(maxSize) || maxSize < 1)
      throw invalidOption('maxSize', maxSize, 'a positive integer (bytes)');
    const maxEntrySize = givenOr(options.maxEntrySize, Math.max(1, Math.floor(maxSize / 8)));
    if (!Number.isSafeInteger(maxEntrySize) || maxEntrySize < 1 || maxEntrySize > maxSize) {
      throw invalidOption(
        'maxEntrySize',
        maxEntrySize,
        `a positive integer (bytes) no larger than maxSize (${maxSize})`,
      );
    }
    this.#maxEntrySize = maxEntrySize;
    this.#lru = new LRUCache<string, Entry>({
      max,
      maxSize,
      maxEntrySize,
      // Every write passes the size it estimated; this only covers a write that would not.
      sizeCalculation: (entry, key) => entrySize(key, entry),
      // Stored (added, or replacing another entry; not the same entry set again): indexed.
      onInsert: (entry, key, reason) => {
        if (reason === 'update' || entry.tags === undefined) return;
        const written: Written = { key, tags: entry.tags.map(boundedKey), indexed: false, disposed: false };
        this.#written.set(key, written);
        this.#noted.push(written);
      },
      // Evicted, deleted or overwritten (before its replacement is inserted): the entry leaves the
      // tag index with it (if it was indexed yet). It is the key's held entry: its note, if tagged.
      dispose: (entry, key) => {
        if (entry.tags === undefined) return;
        const written = this.#written.get(key);
        if (written === undefined) return;
        this.#written.delete(key);
        written.disposed = true;
        if (written.indexed) this.#unindex(written.tags);
      },
    });
  }

  /** Number of distinct tags indexed (for leak checks). */
  get tagCount(): number {
    this.#indexNoted();
    return this.#byTag.size;
  }

  /** @internal Keys held by the tag index, repeats and dropped keys included (for leak checks). */
  get tagIndexLength(): number {
    this.#indexNoted();
    let length = 0;
    for (const record of this.#byTag.values()) length += record.keys.length;
    return length;
  }

  /** Number of entries held (including stale ones not yet overwritten or evicted). */
  get size(): number {
    return this.#lru.size;
  }

  /** Estimated bytes held (see maxSize). */
  get calculatedSize(): number {
    return this.#lru.calculatedSize;
  }

  /** Writes not stored because the entry was estimated larger than maxEntrySize. */
  get oversized(): number {
    return this.#oversized;
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
      const size = entrySize(w.key, w.entry);
      if (size > this.#maxEntrySize) {
        // Not stored, and an older entry of the key is not kept either: it would be older than this.
        this.#oversized++;
        this.#lru.delete(w.key);
        continue;
      }
      this.#lru.set(w.key, w.entry, { size }); // notes it for the tag index (onInsert)
    }
    if (this.#noted.length >= TAG_BATCH) this.#indexNoted();
    return done;
  }

  /** In one process a tag's entries can simply be deleted; the registry abandons fills in flight. */
  invalidateTags(tags: readonly string[]): Promise<void> {
    this.#indexNoted();
    for (const tag of tags) {
      const indexed = boundedKey(tag);
      const record = this.#byTag.get(indexed);
      if (record === undefined) continue;
      // Deleting disposes (and may compact this record: a new array, this one is still read).
      for (const key of record.keys) if (this.#carries(key, indexed)) this.#lru.delete(key);
    }
    return done;
  }

  /** Indexes the noted writes whose entries are still held. */
  #indexNoted(): void {
    const noted = this.#noted;
    if (noted.length === 0) return;
    this.#noted = [];
    for (const written of noted) {
      if (written.disposed) continue;
      written.indexed = true;
      this.#index(written.key, written.tags);
    }
  }

  #index(key: string, tags: readonly string[]): void {
    for (const indexed of tags) {
      const record = this.#byTag.get(indexed);
      if (record === undefined) {
        this.#byTag.set(indexed, { keys: [key], live: 1 });
        continue;
      }
      record.keys.push(key);
      if (++record.live * 2 + TAG_SLACK < record.keys.length) this.#compact(indexed, record);
    }
  }

  #unindex(tags: readonly string[]): void {
    for (const indexed of tags) {
      const record = this.#byTag.get(indexed);
      if (record === undefined) continue;
      if (--record.live <= 0) this.#byTag.delete(indexed);
      else if (record.live * 2 + TAG_SLACK < record.keys.length) this.#compact(indexed, record);
    }
  }

  /** Keeps each key once, and only those whose held entry carries the tag: O(list), once per list-length of changes. */
  #compact(indexed: string, record: TagKeys): void {
    const kept = new Set<string>();
    for (const key of record.keys) if (!kept.has(key) && this.#carries(key, indexed)) kept.add(key);
    record.keys = [...kept];
  }

  /** Whether the entry held under `key` (if any) was written with the tag (in its bounded form). */
  #carries(key: string, indexed: string): boolean {
    const written = this.#written.get(key);
    return written !== undefined && written.tags.includes(indexed);
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

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
 * already bounded (long keys are digests, see ./long-keys); tags are noted by their bounded form.
 *
 * Tags are checked when an entry is read, not indexed when it is written: a whole response
 * carries ~40 tags, and an index (tag → keys), kept at each write and eviction, was most of a
 * response miss's store write (~10 µs of ~11, in a loop; more in a server, each tag's record a
 * cache miss by then). invalidateTags only notes each tag with the store's invalidation count; a
 * tagged entry remembers the count it was last checked at, and a read of it after later
 * invalidations checks its tags once (then remembers the new count): an entry carrying a tag
 * noted after its count is deleted and read as missing. Until a first invalidation a read costs
 * nothing more; after one, a tagged entry's read costs a comparison and a Map lookup (its record),
 * and its tags are checked once per invalidation at most. The notes are bounded (MAX_NOTED tags,
 * MAX_NOTED_CHARS characters): past either, every held tagged entry is checked once (the
 * invalidated ones deleted) and the notes are dropped, as no held entry predates them any more.
 *
 * A @cached field's key is read through its slot (readSlot): the slot keeps the entry it read,
 * and while that key's entry stays (not written again, deleted or evicted since) and no
 * invalidateTags or clear came, the entry is answered from the slot, with no lookup: in a server,
 * lru-cache's lookup is most of a warm field's cost over a plain resolver's (its tables are out
 * of the CPU's caches by then). The store keeps the filled slots by key and empties a key's slot
 * when its entry leaves (lru-cache's dispose: overwritten, deleted, evicted), so a slot never
 * answers, nor keeps alive, an entry the store has dropped; writes of other keys leave it be (a
 * response layer storing its misses writes often). invalidateTags and clear take a new stamp,
 * which every slot filled before fails.
 *
 * Recency: a slot's answer does not move its key up in the LRU order, and only writes evict. So
 * that a key read only from its slot does not drift to the tail unseen, the store also takes a
 * new stamp each time an eighth of `max` entries or of `maxSize` bytes (the two summed as
 * fractions) was written: every slot's next read is then a lookup, which moves its key up. A key
 * read at least once per such eighth has at most two of them written past it (under half the
 * store: an entry is at most maxEntrySize, an eighth of maxSize by default), so writes alone never
 * evict it; lookups of other keys (a loader's, a getOrCompute's) between its moves still move
 * those past it. A store nobody writes to keeps its slots.
 */
import { LRUCache } from 'lru-cache';
import { invalidArgument, invalidOption } from './errors';
import { checkKnownKeys, givenOr, optionNames } from './options';
import type { Entry } from './freshness';
import { boundedKey } from './long-keys';
import { entrySize } from './sizes';
import type { Store, StoreSlot, StoreWrite } from './store';

export interface MemoryStoreOptions {
  /**
   * Most entries kept; the least recently used is evicted first. Default 10000, at most
   * 10,000,000 (MEMORY_STORE_MAX_ENTRIES): lru-cache allocates its tables for `max` entries up front.
   */
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
/**
 * The largest `max`: lru-cache allocates its tables for `max` entries when the store is made, so a
 * `max` meant as "unbounded" costs its memory at once (1e7: ~270 MB and ~1 s) and 2 ** 31 aborts
 * the process (V8's "invalid table size", which no try/catch sees).
 */
export const MEMORY_STORE_MAX_ENTRIES = 10_000_000;
export const MEMORY_STORE_DEFAULT_MAX_SIZE = 64 * 1024 * 1024;
const MEMORY_STORE_OPTIONS = optionNames<MemoryStoreOptions>({ max: true, maxSize: true, maxEntrySize: true });

const done: Promise<void> = Promise.resolve();

/** lru-cache's get options, shared by every read (it only ever sets `status` on it, to undefined here). */
const READ: LRUCache.GetOptions<string, Entry, unknown> = {};

/** Invalidated tags noted at most, and their characters: past either, the notes are swept (see the header). */
const MAX_NOTED = 50_000;
const MAX_NOTED_CHARS = 4 * 1024 * 1024;

/** Stamps given so far: a store's stamp names the store and its state since its last clear or invalidateTags (readSlot). */
let stamps = 0;

/** A held tagged entry's tags (bounded forms), and the store's invalidation count when they were last checked. */
interface Checked {
  readonly tags: readonly string[];
  checked: number;
}

export class MemoryStore implements Store {
  readonly name = 'memory';
  /** @internal Writes and deletes take effect before their promise (see setMany). */
  readonly invalidatesAtOnce = true;
  readonly #lru: LRUCache<string, Entry>;
  /** key → its held tagged entry's tags and last check, for the tagged entries only. */
  readonly #tagged = new Map<string, Checked>();
  /** Invalidated tag (bounded form) → the invalidation count that noted it last, oldest first. */
  readonly #noted = new Map<string, number>();
  /** invalidateTags calls so far: an entry checked at this count needs no check. */
  #invalidations = 0;
  /** Characters of the noted tags (a tag is noted in its bounded form: at most 1,024 + a digest). */
  #notedChars = 0;
  readonly #maxEntrySize: number;
  #oversized = 0;
  /** This store's state (see readSlot): a new stamp at every clear and invalidateTags. */
  #stamp = ++stamps;
  /**
   * How far writes moved the LRU order since the last stamp: each write adds 8 / max and 8 /
   * maxSize per byte; at 1 (an eighth of the store written) a new stamp (see the header).
   */
  #progress = 0;
  readonly #perWrite: number;
  readonly #perByte: number;
  /** The slot filled for each key held, emptied when the key's entry leaves (see the header). */
  readonly #slots = new Map<string, StoreSlot>();

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('options', options, 'an object');
    checkKnownKeys('memoryStore()', options, MEMORY_STORE_OPTIONS);
    const max = givenOr(options.max, MEMORY_STORE_DEFAULT_MAX);
    if (!Number.isSafeInteger(max) || max < 1 || max > MEMORY_STORE_MAX_ENTRIES) {
      const why =
        typeof max === 'number' && max > MEMORY_STORE_MAX_ENTRIES
          ? ' (lru-cache allocates its tables for max entries up front)'
          : '';
      throw invalidOption('max', max, `a positive integer at most 10,000,000${why}`);
    }
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
    this.#perWrite = 8 / max;
    this.#perByte = 8 / maxSize;
    this.#lru = new LRUCache<string, Entry>({
      max,
      maxSize,
      maxEntrySize,
      // Every write passes the size it estimated; this only covers a write that would not.
      sizeCalculation: (entry, key) => entrySize(key, entry),
      // Stored (added, or replacing another entry; not the same entry set again): valid as of now.
      onInsert: (entry, key, reason) => {
        if (reason === 'update') {
          // The same entry written again: written now, so valid as of now.
          const record = this.#tagged.get(key);
          if (record !== undefined) record.checked = this.#invalidations;
          return;
        }
        if (entry.tags === undefined || entry.tags.length === 0) return;
        // The tags as written (a copy: the entry's array may be the caller's, changed later), in
        // the bounded form invalidateTags notes, so a check compares them as they are.
        this.#tagged.set(key, { tags: entry.tags.map(boundedKey), checked: this.#invalidations });
      },
      // Evicted, deleted or overwritten (before its replacement is inserted).
      dispose: (entry, key) => {
        const slot = this.#slots.get(key);
        if (slot !== undefined) {
          slot.entry = undefined;
          this.#slots.delete(key);
        }
        if (entry.tags !== undefined) this.#tagged.delete(key);
      },
    });
  }

  /** Number of invalidated tags noted since the last sweep (at most 50,000: see the header; for leak checks). */
  get tagCount(): number {
    return this.#noted.size;
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
    const entry = this.#lru.get(key, READ);
    // The count first: until a first invalidateTags, a hit reads nothing of the entry here (entries
    // of many shapes meet at this line: reading a property they mostly lack is not free).
    if (this.#invalidations === 0 || entry === undefined || entry.tags === undefined) return entry;
    return this.#unlessInvalidated(key, entry);
  }

  /** @internal getSync through `slot`: the entry it holds while its key's entry stays (see the header). */
  readSlot(slot: StoreSlot): Entry | undefined {
    const held = slot.entry;
    if (held !== undefined && slot.stamp === this.#stamp) return held;
    const entry = this.getSync(slot.stored);
    if (entry === undefined) return undefined;
    const key = slot.stored;
    const slots = this.#slots;
    const before = slots.get(key);
    // One slot per key: another one filled for it before (a second cache on this store) is
    // emptied, as the store will not tell it of the key's next change.
    if (before !== slot) {
      if (before !== undefined) before.entry = undefined;
      slots.set(key, slot);
    }
    slot.entry = entry;
    slot.stamp = this.#stamp; // read after getSync, which may have deleted an invalidated entry
    return entry;
  }

  /** A clear, an invalidateTags, an eighth of the store written: a new stamp, which every slot filled before fails (see the header). */
  #restamp(): void {
    this.#stamp = ++stamps;
    this.#progress = 0;
  }

  getMany(keys: readonly string[]): Promise<(Entry | undefined)[]> {
    const out = new Array<Entry | undefined>(keys.length);
    for (let i = 0; i < keys.length; i++) out[i] = this.getSync(keys[i]!);
    return Promise.resolve(out);
  }

  /** The tagged entry held under `key`, unless a tag it carries was invalidated since its last check (then deleted). */
  #unlessInvalidated(key: string, entry: Entry): Entry | undefined {
    const record = this.#tagged.get(key);
    if (record === undefined || record.checked === this.#invalidations) return entry;
    if (this.#invalidatedSince(record)) {
      this.#lru.delete(key);
      return undefined;
    }
    record.checked = this.#invalidations;
    return entry;
  }

  /** Whether a tag of `record` was noted after its last check. */
  #invalidatedSince(record: Checked): boolean {
    const noted = this.#noted;
    for (const tag of record.tags) {
      const at = noted.get(tag);
      if (at !== undefined && at > record.checked) return true;
    }
    return false;
  }

  keeps(key: string, entry: Entry): boolean {
    if (entrySize(key, entry) <= this.#maxEntrySize) return true;
    this.#oversized++; // a write not made, counted as setMany counts one it skips
    return false;
  }

  // Writes and deletes take effect synchronously, before the returned promise: the registry
  // relies on that so a value is visible to the next caller the moment its flight settles.
  setMany(writes: readonly StoreWrite[]): Promise<void> {
    for (const w of writes) {
      const size = entrySize(w.key, w.entry);
      if ((this.#progress += this.#perWrite + size * this.#perByte) >= 1) this.#restamp();
      if (size > this.#maxEntrySize) {
        // Not stored, and an older entry of the key is not kept either: it would be older than this.
        this.#oversized++;
        this.#lru.delete(w.key);
        continue;
      }
      this.#lru.set(w.key, w.entry, { size }); // a tagged entry is noted valid as of now (onInsert)
    }
    return done;
  }

  /**
   * In one process a tag's entries can simply be missed from now on (the registry abandons fills
   * in flight): each tag is noted with this call's count, and read checks do the rest (header).
   */
  invalidateTags(tags: readonly string[]): Promise<void> {
    this.#restamp();
    const at = ++this.#invalidations;
    const noted = this.#noted;
    for (const tag of tags) {
      const bounded = boundedKey(tag);
      if (!noted.has(bounded)) this.#notedChars += bounded.length;
      noted.set(bounded, at);
    }
    if (noted.size > MAX_NOTED || this.#notedChars > MAX_NOTED_CHARS) this.#sweep();
    return done;
  }

  /**
   * Checks every held tagged entry now (deleting the invalidated ones), so that no held entry
   * predates a note: the notes are dropped. O(tagged entries × their tags), once per MAX_NOTED
   * notes at most; an entry unrelated to the invalidations is kept, however long since it was read.
   */
  #sweep(): void {
    const now = this.#invalidations;
    for (const [key, record] of this.#tagged) {
      if (record.checked === now) continue;
      if (this.#invalidatedSince(record))
        this.#lru.delete(key); // disposes: leaves #tagged (deleting while iterating a Map is safe)
      else record.checked = now;
    }
    this.#noted.clear();
    this.#notedChars = 0;
  }

  delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.#lru.delete(key);
    return done;
  }

  clear(): Promise<void> {
    this.#restamp();
    this.#lru.clear();
    // Nothing held predates the notes any more: they have nothing left to judge.
    this.#noted.clear();
    this.#notedChars = 0;
    return done;
  }
}

/** The in-process store: bounded LRU, no serialization. */
export function memoryStore(options?: MemoryStoreOptions): MemoryStore {
  return new MemoryStore(options);
}

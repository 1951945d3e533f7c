/**
 * The tiered store's L1: the in-process copies of L2 entries, and the rules that keep them coherent.
 *
 * What L1 holds is only ever a copy of what L2 held or confirmed, and for at most `l1Ttl`:
 * - a copy enters L1 only if nothing touching its key or tags happened while it was read (a
 *   message from another replica, or a write/invalidation issued here: see ChangeWindow), and, for
 *   a tagged value, only after its tag versions were found current in L2. Without that, an L2 read
 *   racing an invalidation could put back the very value the invalidation removed, and the registry
 *   does not check tags on the synchronous path;
 * - a change (heard or made here) drops the copies of its keys or tags, or all of them.
 * The facade (tiered.ts) decides when; this file knows how.
 */
import type { Entry } from '../core/freshness';
import type { MemoryStore } from '../core/memory';
import type { StoreWrite } from '../core/store';
import { ChangeWindow } from './tiered-bus';

/**
 * An L1 copy: the entry as L2 had it, plus when the copy must be dropped (l1Until), also as its
 * servedUntil, which the registry checks with its own clock read (see peekSync).
 */
export type L1Entry = Entry & { readonly l1Until: number; readonly servedUntil: number };

export interface Candidate {
  readonly key: string;
  readonly entry: Entry;
}

export class L1Copies {
  readonly #l1: MemoryStore;
  readonly #tagVersions: (tags: readonly string[]) => Promise<number[]>;
  readonly #l1Ttl: number;
  readonly #now: () => number;
  /** Reads and writes of L2 in flight whose results may become L1 copies. */
  readonly #windows = new Set<ChangeWindow>();
  #closed = false;
  clears = 0;
  promoted = 0;
  refused = 0;

  constructor(
    l1: MemoryStore,
    tagVersions: (tags: readonly string[]) => Promise<number[]>,
    l1Ttl: number,
    now: () => number,
  ) {
    this.#l1 = l1;
    this.#tagVersions = tagVersions;
    this.#l1Ttl = l1Ttl;
    this.#now = now;
  }

  get size(): number {
    return this.#l1.size;
  }

  /** A copy still within l1Ttl (fresh or not), or undefined; an expired copy is dropped. */
  getSync(key: string): Entry | undefined {
    const copy = this.#l1.getSync(key) as L1Entry | undefined;
    if (copy === undefined) return undefined;
    if (this.#now() < copy.l1Until) return copy;
    void this.#l1.delete([key]);
    return undefined;
  }

  /**
   * getSync without the clock read: the registry judges the copy's servedUntil (= l1Until) with the
   * clock read it makes anyway (a second one cost an L1 hit ~90 ns, a third of it). A copy past it
   * stays until the getMany its miss leads to (fresh()) drops it.
   */
  peekSync(key: string): Entry | undefined {
    return this.#l1.getSync(key);
  }

  /**
   * A copy that may answer a getMany at `now`: within l1Ttl and fresh. A stale copy is not
   * answered from L1: another replica may have refreshed it in L2.
   */
  fresh(key: string, now: number): Entry | undefined {
    const copy = this.#l1.getSync(key) as L1Entry | undefined;
    if (copy === undefined) return undefined;
    if (now < copy.l1Until) return now < copy.freshUntil ? copy : undefined;
    void this.#l1.delete([key]);
    return undefined;
  }

  /** Opens the window of an L2 call issued at `now`; close it with promote() or discard(). */
  open(now: number): ChangeWindow {
    const window = new ChangeWindow(now);
    this.#windows.add(window);
    return window;
  }

  /** The call failed: nothing of it becomes a copy. */
  discard(window: ChangeWindow): void {
    this.#windows.delete(window);
  }

  /**
   * A write issued here supersedes the L1 copies of its keys (older), and whatever L2 reads in
   * flight will answer for them (issued before it): both are dropped. Returns the write's window.
   */
  beforeWrite(keys: readonly string[]): ChangeWindow {
    this.dropKeys(keys);
    return this.open(this.#now());
  }

  /** L2 has nothing for these keys (read in `window`): a copy left cannot be more right than L2. */
  forget(window: ChangeWindow, keys: readonly string[]): void {
    const gone = keys.filter((key) => window.allows(key, undefined));
    if (gone.length > 0) void this.#l1.delete(gone);
  }

  /**
   * Copies L2 entries into L1, unless their key or tags changed while they were read. A tagged
   * entry is copied only once its recorded tag versions are found current (one more call, off the
   * caller's path): it may have been written by a fill that raced an invalidateTags, and would be
   * served from L1 without the check the registry makes on L2 reads. Closes the window.
   */
  promote(window: ChangeWindow, candidates: readonly Candidate[]): void {
    const now = this.#now();
    const untagged: Candidate[] = [];
    let tagged: Candidate[] | undefined;
    for (const candidate of candidates) {
      const entry = candidate.entry;
      if (!(now < entry.staleUntil)) continue;
      if (entry.tags === undefined || entry.tags.length === 0) untagged.push(candidate);
      else if (entry.tagVersions !== undefined && entry.tagVersions.length === entry.tags.length)
        (tagged ??= []).push(candidate);
    }
    this.#copy(window, untagged);
    if (tagged === undefined) {
      this.#windows.delete(window);
      return;
    }
    const checked = tagged;
    const tags = [...new Set(checked.flatMap((candidate) => candidate.entry.tags!))];
    this.#tagVersions(tags).then(
      (versions) => {
        const current = new Map<string, number>();
        for (let i = 0; i < tags.length; i++) current.set(tags[i]!, versions[i]!);
        const valid = checked.filter(({ entry }) =>
          entry.tags!.every((tag, i) => current.get(tag) === entry.tagVersions![i]),
        );
        this.refused += checked.length - valid.length;
        this.#copy(window, valid);
        this.#windows.delete(window);
      },
      () => {
        // Versions unknown: no copy. The next read goes to L2 again.
        this.refused += checked.length;
        this.#windows.delete(window);
      },
    );
  }

  #copy(window: ChangeWindow, candidates: readonly Candidate[]): void {
    if (candidates.length === 0 || this.#closed) return;
    const until = window.start + this.#l1Ttl;
    const copies: StoreWrite[] = [];
    for (const { key, entry } of candidates) {
      if (!window.allows(key, entry)) {
        this.refused++;
        continue;
      }
      // One literal, one shape for every copy (a spread copies the shape of each decoded entry).
      const copy: L1Entry = {
        value: entry.value,
        freshUntil: entry.freshUntil,
        staleUntil: entry.staleUntil,
        fillMs: entry.fillMs,
        tags: entry.tags,
        tagVersions: entry.tagVersions,
        resolved: undefined,
        l1Until: until,
        servedUntil: until,
      };
      copies.push({ key, entry: copy, ttl: this.#l1Ttl });
    }
    this.promoted += copies.length;
    if (copies.length > 0) void this.#l1.setMany(copies);
  }

  dropKeys(keys: readonly string[]): void {
    void this.#l1.delete(keys);
    for (const window of this.#windows) window.dropKeys(keys);
  }

  dropTags(tags: readonly string[]): void {
    void this.#l1.invalidateTags(tags);
    for (const window of this.#windows) window.dropTags(tags);
  }

  dropAll(): void {
    this.clears++;
    void this.#l1.clear();
    for (const window of this.#windows) window.dropAll();
  }

  /** Empties L1 and copies nothing from now on. */
  close(): void {
    this.#closed = true;
    this.dropAll();
  }
}

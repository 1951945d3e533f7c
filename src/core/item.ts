/**
 * What the load path hands from stage to stage: an Item per key missed, and the Source that
 * computes it. Types only, so every stage (flights, the tick queue, the read, lock and fill steps
 * of the pipeline, validity) can name them without importing another stage: the arrows point one
 * way, from the stage that makes an Item to the ones that consume it.
 */
import type { FillSignal } from './fill-run';
import type { Entry } from './freshness';
import type { Flight } from './flight';
import type { Counted, Sink } from './metrics';
import type { Policy } from './options';
import type { FillInfo } from './types';

/** One key waiting to be read, locked or filled. */
export interface Item {
  readonly source: Source;
  readonly key: string;
  readonly flight: Flight;
  /**
   * What the source's fill needs for this key: the loader's own key, or the getOrCompute fill.
   * Dropped once the item's flight is answered (FillWrite): a batch's items are held until its
   * last fill ends, and a getOrCompute fill's closure holds its caller's request.
   */
  arg: unknown;
  readonly policy: Policy;
  /** The request scope of the caller that started the flight: fills are attributed to it. */
  readonly sink: Sink | undefined;
  /** For a background refresh: freshUntil of the entry it replaces (a newer entry ends it). */
  readonly replaces?: number;
  /**
   * A probe (LoadPath's, a caller's read during a refresh on an async store): the entry the refresh
   * replaces. Answered by the read only, never filled or locked: a read that failed answers this
   * entry; one that found nothing usable abandons the probe (its callers then join the refresh).
   */
  readonly probe?: Entry;
  /** Tags of the value (loader `tags(key)`, or getOrCompute's `tags`). */
  readonly tags: readonly string[] | undefined;
  /** On a tag-versioned store: the tags' versions read before the fill, aligned with `tags`. */
  versions?: readonly number[];
  /**
   * For a late-tagged fill on a store with a tag clock: the clock read before the fill (NaN: the
   * read failed). Its late tags invalidated after it make the value served but not stored.
   */
  clock?: number;
  /**
   * Whether the load that started this flight is already counted (a caller re-contending after
   * an abandoned flight, or a background refresh, which is no load): the outcome recorded at
   * dispatch (hit, miss, stale) is then skipped, so every load counts exactly once.
   */
  counted: boolean;
}

/** Something that computes values: a loader, or getOrCompute. */
export interface Source extends Counted {
  /** @internal Splits the items to fill into calls of the user's function (batches, or one per key). */
  groups(items: Item[]): Item[][];
  /** @internal Runs one call; returns per item a value, `undefined` (nothing to cache), or a Failure. */
  run(items: Item[], run: FillSignal): Promise<unknown[]>;
  /** @internal Tags of the value for `arg` (a loader's tags option); computed on a miss only. */
  tagsOf?(arg: unknown): readonly string[] | undefined;
  /** @internal The source's own batch window (a loader's batchScheduleFn); default: one dispatch per tick for all. */
  readonly schedule?: (dispatch: () => void) => void;
}

/** How a fill call relates to the fill lock (FillInfo.lock): won, none needed, failed, timed out. */
export type LockOutcome = FillInfo['lock'];

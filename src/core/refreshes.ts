/**
 * Background refreshes (stale-while-revalidate, early refresh): at most one per key, at most
 * `maxRefreshes` at once (more are dropped, counted). A refresh is a flight no caller owns,
 * queued for the tick's dispatch like a miss; the entry it replaces is served meanwhile.
 */
import type { FlightTable } from './flight-table';
import type { Entry } from './freshness';
import type { Item, Source } from './item';
import type { Policy } from './options';
import type { DispatchQueue } from './tick';
import { tagsFor } from './validity';

export class Refreshes {
  readonly #flights: FlightTable;
  readonly #queue: DispatchQueue<Source, Item>;
  readonly #max: number;
  #running = 0;

  constructor(flights: FlightTable, queue: DispatchQueue<Source, Item>, max: number) {
    this.#flights = flights;
    this.#queue = queue;
    this.#max = max;
  }

  /** Starts one background refresh of a stale key, unless one runs or the cap is reached. */
  start(source: Source, key: string, arg: unknown, policy: Policy, replacing: Entry): void {
    if (this.#flights.get(key) !== undefined) return;
    if (this.#running >= this.#max) {
      // Dropped, not queued: the stale value keeps being served and a later read retries.
      source.counters.refreshesDropped++;
      return;
    }
    let tags: readonly string[] | undefined;
    try {
      tags = tagsFor(source, arg, policy);
    } catch {
      return; // the tags function threw: the caller that had it throw on a miss will see it
    }
    this.#running++;
    source.counters.refreshes++;
    const flight = this.#flights.start(key, true, tags);
    // Served to callers meanwhile only if an invalidateTags that could void it also reaches this
    // flight (abandoning it): the entry's own tags must all be among the flight's (a late-tagged
    // flight stops serving it when one of its tags is invalidated: FlightTable.abandonTagged). On a store read asynchronously, a caller reads the store
    // first all the same (LoadPath's probe): another replica's invalidation reaches no flight here.
    if (policy.lateTags === true) flight.lateTags = true;
    if (flight.lateTags || replacing.tags === undefined || replacing.tags.every((tag) => tags?.includes(tag) === true))
      flight.replacing = replacing;
    const done = () => {
      this.#running--;
    };
    flight.promise.then(done, done);
    this.#queue.enqueue({
      source,
      key,
      flight,
      arg,
      policy,
      sink: undefined,
      replaces: replacing.freshUntil,
      tags,
      counted: true,
    });
  }
}

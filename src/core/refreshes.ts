/**
 * Background refreshes (stale-while-revalidate, early refresh): at most one per key, at most
 * `maxRefreshes` at once (more are dropped, counted). A refresh is a flight no caller owns,
 * queued for the tick's dispatch like a miss; the entry it replaces is served meanwhile.
 *
 * A refresh counts towards the cap until it ends or the entry it replaces can no longer be
 * served (its staleUntil, by the registry's clock), whichever comes first: past that it refreshes
 * nothing, it is the key's fill (callers join it), and a fill that never ends (a hung database
 * call) must not hold a slot for good, or no other key would be refreshed again.
 */
import type { Flight } from './flight';
import type { FlightTable } from './flight-table';
import type { Clock, Entry } from './freshness';
import type { Item, Source } from './item';
import type { Policy } from './options';
import type { DispatchQueue } from './tick';
import { tagsFor } from './validity';

export class Refreshes {
  readonly #flights: FlightTable;
  readonly #queue: DispatchQueue<Source, Item>;
  readonly #max: number;
  readonly #clock: Clock;
  /** The refreshes holding a place, with the staleUntil of the entry each replaces. */
  readonly #running = new Map<Flight, number>();

  constructor(flights: FlightTable, queue: DispatchQueue<Source, Item>, max: number, clock: Clock) {
    this.#flights = flights;
    this.#queue = queue;
    this.#max = max;
    this.#clock = clock;
  }

  /** Lets go of the places of refreshes whose replaced entry can no longer be served (see the header). */
  #release(): void {
    const now = this.#clock.now();
    for (const [flight, until] of this.#running) if (!(now < until)) this.#running.delete(flight);
  }

  /**
   * Whether `flight` is a refresh whose replaced entry can still be served: callers that joined it
   * (a coalesce-only call, a Redis read that found nothing) do not abandon it by leaving, since
   * callers answered with that entry count on it.
   */
  serving(flight: Flight): boolean {
    const until = this.#running.get(flight);
    return until !== undefined && this.#clock.now() < until;
  }

  /** Starts one background refresh of a stale key, unless one runs or the cap is reached. */
  start(source: Source, key: string, arg: unknown, policy: Policy, replacing: Entry): void {
    if (this.#flights.get(key) !== undefined) return;
    if (this.#running.size >= this.#max) this.#release();
    if (this.#running.size >= this.#max) {
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
    source.counters.refreshes++;
    const flight = this.#flights.start(key, true, tags);
    this.#running.set(flight, replacing.staleUntil);
    // Served to callers meanwhile only if an invalidateTags that could void it also reaches this
    // flight (abandoning it): the entry's own tags must all be among the flight's (a late-tagged
    // flight stops serving it when one of its tags is invalidated: FlightTable.abandonTagged). On a store read asynchronously, a caller reads the store
    // first all the same (LoadPath's probe): another replica's invalidation reaches no flight here.
    if (policy.lateTags === true) flight.lateTags = true;
    if (flight.lateTags || replacing.tags === undefined || replacing.tags.every((tag) => tags?.includes(tag) === true))
      flight.replacing = replacing;
    const done = () => {
      this.#running.delete(flight);
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

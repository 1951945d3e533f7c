/**
 * The flights in progress, by key: one per key at a time (see ./flight). Ends them as the load
 * path and the invalidations say, and lets go of the ended ones.
 */
import { Failure, Flight } from './flight';

/** Ended flights after which a table sweeps even with pending flights left (see #remove). */
const SWEEP_AFTER = 1024;

/**
 * What an ended flight's entry holds until the next sweep: not the flight, which holds its value
 * and its settled promises (1,024 values past their invalidation or eviction were kept alive while
 * any other fill ran).
 */
const ENDED = new Flight('', false, undefined);
ENDED._resolve(undefined);

export class FlightTable {
  /**
   * Key → its flight. An ended flight's entry stays, as ENDED (get() skips it), until its key's next
   * flight replaces it or a sweep moves the pending ones to a new Map (none, most often: a dispatch
   * ended them all).
   * A Map.delete per flight shrinks and rehashes the table as it empties (a runtime call each), and
   * V8 links each discarded table of a churning Map to its successor: one in the old generation
   * kept every later table, flights and promises alive through each young collection (3-4 MB
   * copied per scavenge instead of 0.1 MB). So the Map is renewed, not emptied entry by entry.
   */
  #flights = new Map<string, Flight>();
  /** Detached flights whose fill has not delivered yet (see Flight's header): close() reaches them here. */
  readonly #detached = new Set<Flight>();
  /** Sealed flights not ended yet (see seal): out of the Map, still reached by invalidations. */
  readonly #sealed = new Set<Flight>();
  /** Flights ended as their key's entry since the last sweep (a replaced one still counts). */
  #ended = 0;

  /** Flights pending (counted: for tests and leak checks, not the load path). */
  get size(): number {
    return this.#pending().length;
  }

  /** @internal Entries held, ended flights not swept yet included (tests). */
  get held(): number {
    return this.#flights.size;
  }

  /** The key's pending flight. */
  get(key: string): Flight | undefined {
    const flight = this.#flights.get(key);
    return flight === undefined || flight.ended ? undefined : flight;
  }

  start(key: string, background: boolean, tags: readonly string[] | undefined): Flight {
    const flight = new Flight(key, background, tags);
    this.#flights.set(key, flight);
    return flight;
  }

  /**
   * Closes a pending flight to new callers: they start a flight of their own (which reads the
   * store, maybe after this one's write), while its callers so far still get its result and
   * invalidations still reach it. For a late-tagged fill whose tags' versions are read now: a
   * caller joining after the read was sent may come after an invalidation on another replica that
   * the read missed (its store call landed first), and must not be handed the older result.
   */
  seal(flight: Flight): void {
    if (flight.ended || this.#flights.get(flight.key) !== flight) return;
    this.#sealed.add(flight);
    this.#vacate(flight);
  }

  /** Hands the value to every waiter and frees the key. */
  resolve(flight: Flight, value: unknown): void {
    if (flight._resolve(value)) this.#remove(flight);
  }

  fail(flight: Flight, error: unknown): void {
    if (flight._fail(error)) this.#remove(flight);
  }

  /** `patient`: an invalidation, which may detach the flight instead (see Flight's header). */
  abandon(flight: Flight, reason: unknown, patient = false): void {
    const detached = flight.detached;
    if (!flight._abandon(reason, patient)) return;
    if (detached) {
      this.#detached.delete(flight); // out of the table since it was detached
      return;
    }
    if (flight.detached) this.#detached.add(flight);
    this.#remove(flight);
  }

  /** Answers the callers of a detached flight with its fill's result (a Failure: its error); nothing is written. */
  deliver(flight: Flight, result: unknown): void {
    if (!this.#detached.delete(flight)) return; // abandoned since (its callers left, the cache closed)
    if (result instanceof Failure) flight._fail(result.error);
    else flight._resolve(result);
  }

  /**
   * Fails what a dispatch left unsettled when it failed itself (a bug, or a user callback the
   * pipeline does not guard: a clock's sleep): a load must settle, never hang on a lost dispatch.
   */
  failUnsettled(flights: readonly Flight[], error: unknown): void {
    for (const flight of flights) {
      if (flight.detached) this.deliver(flight, new Failure(error));
      else if (!flight.ended) this.fail(flight, error);
    }
  }

  /**
   * Abandons the flights computing a value that carries one of `tags`. A late-tagged flight (its
   * tags known when it ends) is abandoned before its fill runs (a read under way may predate the
   * invalidation); while it runs, the tags are noted and checked when it ends (abandonLate), so an
   * invalidation of other entities leaves it be; once its tags are known (until it is written and
   * answered), an invalidation of one of them abandons it at once, as any tagged flight.
   */
  abandonTagged(tags: ReadonlySet<string>, reason: unknown, patient = false, after = 0, unfilled = false): void {
    for (const flight of this.#pending()) {
      if (flight.seq <= after) continue; // started before: see Invalidation's sweep
      if (unfilled && flight.run !== undefined) continue; // filling: not reading the store (Invalidation's #resend)
      if (flight.lateTags) {
        const known = flight.lateKnown;
        // Before its fill runs, or one of its tags (known once it ended) invalidated: abandoned.
        if (flight.run === undefined || known === true || known?.some((tag) => tags.has(tag)) === true) {
          this.abandon(flight, reason, patient);
          continue;
        }
        if (known === undefined) noteLate(flight, tags);
        // A refresh: the entry it replaces, served meanwhile, is no longer served once one of
        // its tags is invalidated (callers wait for the refresh, checked when it ends).
        const replacing = flight.replacing;
        if (replacing?.tags !== undefined && replacing.tags.some((tag) => tags.has(tag))) flight.replacing = undefined;
      } else if (flight.tags !== undefined && flight.tags.some((tag) => tags.has(tag)))
        this.abandon(flight, reason, patient);
    }
  }

  /**
   * A joiner's own tags (getOrCompute's `tags`) that the flight's value does not carry: added, so
   * invalidateTags of one of them abandons the fill from now on (its callers start over), and the
   * value is served, not written (core/fill-write): one of them may have been invalidated before
   * the joiner came, after the fill started. The next caller fills with its own tags. Without this
   * a joiner naming `User:1` got, and kept, a value `invalidateTags(['User:1'])` did not reach.
   */
  joinTags(flight: Flight, tags: readonly string[]): void {
    let added: string[] | undefined;
    for (const tag of tags) if (flight.tags?.includes(tag) !== true) (added ??= []).push(tag);
    if (added === undefined) return;
    (flight.joinedTags ??= []).push(...added);
    // At most JOINED_TAGS_MAX kept for invalidateTags (the value is not written either way).
    if (flight.joinedTags.length <= JOINED_TAGS_MAX) flight.tags = [...(flight.tags ?? []), ...added];
  }

  /**
   * Abandons a late-tagged flight whose fill ended with `tags` when one of them (any, with `anyTag`:
   * its value's tags are not all known) was invalidated while it ran: its callers re-contend, its
   * result is not written. True when abandoned.
   */
  abandonLate(flight: Flight, tags: readonly string[], anyTag: boolean, reason: unknown): boolean {
    if (flight.ended) return false;
    // Known from now on: a later invalidation of one of them (any, with anyTag) abandons it at once (abandonTagged).
    flight.lateKnown = anyTag ? true : tags;
    const noted = flight.lateNoted;
    if (noted === undefined) return false;
    if (noted !== true && !anyTag && !tags.some((tag) => noted.has(tag))) return false;
    this.abandon(flight, reason);
    return true;
  }

  /**
   * Abandons every flight (cache.clear(), close()): their waiters re-contend, their results are
   * dropped. Not patient (close()): the detached ones too.
   */
  abandonAll(reason: unknown, patient = false, after = 0, unfilled = false): void {
    for (const flight of this.#pending())
      if (flight.seq > after && !(unfilled && flight.run !== undefined)) this.abandon(flight, reason, patient);
    if (!patient) for (const flight of [...this.#detached]) this.abandon(flight, reason, false);
  }

  /** The pending flights: those in the Map, and the sealed ones. */
  #pending(): Flight[] {
    const pending = this.#inMap();
    for (const flight of this.#sealed) if (!flight.ended) pending.push(flight);
    return pending;
  }

  #inMap(): Flight[] {
    const pending: Flight[] = [];
    for (const flight of this.#flights.values()) if (!flight.ended) pending.push(flight);
    return pending;
  }

  #remove(flight: Flight): void {
    if (this.#sealed.size > 0) this.#sealed.delete(flight);
    // Only our own entry: loadAlone's and sealed flights are not in the Map, and an ending flight
    // never stands for a newer one of its key (LoadPath starts one only once get() finds none).
    if (this.#flights.get(flight.key) === flight) this.#vacate(flight);
  }

  /** Lets go of the key's entry, `flight` (ended or sealed). */
  #vacate(flight: Flight): void {
    const flights = this.#flights;
    flights.set(flight.key, ENDED); // the key's entry stays: no delete (see #flights)
    // Swept once every entry may have ended, or the ended ones are many and at least half: a table
    // never holds more than twice its pending flights (plus SWEEP_AFTER).
    const ended = ++this.#ended;
    if (ended < flights.size && (ended < SWEEP_AFTER || 2 * ended < flights.size)) return;
    const pending = this.#inMap();
    this.#flights = pending.length === 0 ? new Map() : new Map(pending.map((kept) => [kept.key, kept]));
    this.#ended = 0;
  }
}

/** A joiner's tags added to a flight at most (FlightTable.joinTags). */
const JOINED_TAGS_MAX = 64;

/** Tags noted per late-tagged flight at most: past it, any invalidation counts (abandonLate). */
const LATE_NOTED_MAX = 1_024;

function noteLate(flight: Flight, tags: ReadonlySet<string>): void {
  let noted = flight.lateNoted;
  if (noted === true) return;
  if (noted === undefined) flight.lateNoted = noted = new Set();
  if (noted.size + tags.size > LATE_NOTED_MAX) flight.lateNoted = true;
  else for (const tag of tags) noted.add(tag);
}

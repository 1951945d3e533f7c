/**
 * A flight's store read under way on a store read asynchronously (Redis, a tiered store's L2).
 * The read was sent before a caller arriving now: an invalidation on another replica that returned
 * before this caller came may have reached the store after the read, which then finds the value it
 * made older (and the tag versions of before). So a caller arriving while its key's flight reads
 * waits for the read's end (LoadPath), then loads as if it came then: it joins the flight if the
 * flight goes on to fill or to wait for a lock (its next read is sent after the caller came), else
 * it reads the store itself, in one flight with the other callers that waited. A fill is never run
 * twice for it: only a read is. The callers that came before the read was sent take its answer.
 */
import { raceAbort } from './abort-race';
import { recordOutcome } from './outcome';

/** What a flight holds while one of its reads is under way (Flight.reading). */
export type Reading = typeof READING | ReadEnd;

/** A read under way that no caller waits on: the common case, no promise made. */
const READING = 1;

/** A read under way with callers waiting for its end. */
class ReadEnd {
  readonly promise: Promise<void>;
  resolve!: () => void;
  constructor() {
    this.promise = new Promise<void>((resolve) => (this.resolve = resolve));
  }
}

interface Reads {
  reading: Reading | undefined;
  joinedSinceRead: boolean;
}

/**
 * Notes a read sent for each of `items`' flights (call it in the step that sends the read). Its
 * callers so far came before it (Flight.joinedSinceRead): for an item with tags, only when the
 * read reads their versions too (`versions`), which judge what it finds.
 */
export function beginReads(
  items: readonly { readonly flight: Reads; readonly tags: readonly string[] | undefined }[],
  versions: boolean,
): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const flight = item.flight;
    if (flight.reading === undefined) flight.reading = READING;
    if (versions || item.tags === undefined) flight.joinedSinceRead = false;
  }
}

/** The reads of `items`' flights answered (each flight answered by it, or going on): their waiting callers load. */
export function endReads(items: readonly { readonly flight: Reads }[]): void {
  for (let i = 0; i < items.length; i++) endRead(items[i]!.flight);
}

export function endRead(flight: Reads): void {
  const reading = flight.reading;
  if (reading === undefined) return;
  flight.reading = undefined;
  if (reading !== READING) reading.resolve();
}

/**
 * A caller that came while `flight`'s store read was under way: `load` once the read is answered
 * (or the flight ended). Its signal leaves the wait; the load then sees it aborted and ends at once.
 */
export function afterRead<V>(flight: Reads, load: () => Promise<V>, signal: AbortSignal | undefined): Promise<V> {
  const loaded = readEnd(flight).then(load);
  recordOutcome(loaded); // a request scope forgets a failed load (outcomeOf), as it would a flight's
  return signal === undefined ? loaded : raceAbort(loaded, signal, ignore);
}

function ignore(): void {}

/** Settles when the flight's read under way is answered (or the flight ended). */
function readEnd(flight: Reads): Promise<void> {
  let reading = flight.reading;
  if (reading === undefined) return Promise.resolve();
  if (reading === READING) flight.reading = reading = new ReadEnd();
  return reading.promise;
}

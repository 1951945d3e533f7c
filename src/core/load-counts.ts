/**
 * Counting the load path's outcomes: every load counted exactly once (hit, miss, coalesced,
 * stale), on its source's counters, its request scope's sink, and the observers' hooks. A caller
 * joining a flight before its outcome is known is noted on the flight and counted when the
 * pipeline learns it (settled): a flight answered from the store is a hit (or stale) for all its
 * callers; only one that fills makes its joiners "coalesced".
 */
import type { Flight } from './flight';
import { type Observers, notify } from './hooks';
import type { Item, Source } from './item';
import { type Sink, type Tally, countOn } from './metrics';

type Counter = 'hits' | 'misses' | 'coalesced' | 'staleServed';

/** Counts a load's outcome and tells its observer. */
export function record(
  observers: Observers,
  source: Source,
  counter: Counter,
  key: string,
  sink: Sink | undefined,
): void {
  countOn(source, counter, sink);
  const hook = observers.hookFor(counter);
  if (hook !== undefined) notify(hook, [key, source.name]);
}

/** Counts a caller joining `flight`: by its outcome when known, else noted on the flight (see the header). */
export function joined(
  observers: Observers,
  flight: Flight,
  source: Source,
  key: string,
  sink: Sink | undefined,
): void {
  const outcome = flight.joinedAs;
  if (outcome !== undefined) record(observers, source, outcome, key, sink);
  else if ((sink === undefined || sink.joined) && (flight.joinSource === undefined || flight.joinSource === source)) {
    // Counted at once when the outcome is known; a request scope counts its share itself (joined).
    flight.joinSource = source;
    flight.joins++;
    if (sink !== undefined) sink.joined!(flight);
  } else (flight.joiners ??= []).push(source, sink);
}

/**
 * The outcome of a flight's store read (or its abandonment before one): counts the load that
 * started it (unless counted already) and, in one pass, the callers that joined it meanwhile.
 */
export function settled(
  observers: Observers,
  item: Item,
  counter: 'hits' | 'staleServed' | 'misses',
  tally?: Tally,
): void {
  if (!item.counted) {
    item.counted = true;
    // A run of the tally when no observer wants each key (see Tally).
    if (tally !== undefined && observers.hookFor(counter) === undefined) tally.add(item.source, counter, item.sink);
    else record(observers, item.source, counter, item.key, item.sink);
  }
  const flight = item.flight;
  if (flight.joinedAs !== undefined) return;
  const outcome = counter === 'misses' ? 'coalesced' : counter;
  flight.joinedAs = outcome;
  const source = flight.joinSource;
  if (source !== undefined) {
    const n = flight.joins;
    source.counters[outcome] += n;
    const hook = observers.hookFor(outcome);
    if (hook !== undefined) for (let i = 0; i < n; i++) notify(hook, [flight.key, source.name]);
  }
  const joiners = flight.joiners;
  if (joiners !== undefined)
    for (let i = 0; i < joiners.length; i += 2)
      record(observers, joiners[i] as Source, outcome, flight.key, joiners[i + 1] as Sink | undefined);
  flight.joiners = undefined; // joinSource stays: the request scopes that joined count under it
}

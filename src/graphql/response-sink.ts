/** What the response layer learns of one lookup from the registry's counting (see ResponseEngine.lookup). */
import type { Sink } from '../core/metrics';

/** How the registry answered one lookup: the last outcome counted for it. */
export class OutcomeSink implements Sink {
  outcome: string | undefined;
  count(_source: string, counter: string): void {
    if (counter === 'hits' || counter === 'misses' || counter === 'coalesced' || counter === 'staleServed')
      this.outcome = counter;
  }
}

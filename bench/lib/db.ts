/**
 * The simulated database every system under test fills from: a fixed delay per call, and
 * counters, so a row can say how many fills each system really paid for.
 */
import { sleep } from './stats';

export interface Item {
  readonly id: string;
  readonly n: number;
}

export function item(id: string): Item {
  return { id, n: id.length };
}

export class SlowDb {
  /** Calls made (a batch counts once). */
  calls = 0;
  /** Keys computed: the fills. */
  rows = 0;

  constructor(readonly delayMs: number) {}

  async get(id: string): Promise<Item> {
    this.calls++;
    this.rows++;
    await sleep(this.delayMs);
    return item(id);
  }

  async getMany(ids: readonly string[]): Promise<Item[]> {
    this.calls++;
    this.rows += ids.length;
    await sleep(this.delayMs);
    return ids.map(item);
  }

  reset(): void {
    this.calls = 0;
    this.rows = 0;
  }
}

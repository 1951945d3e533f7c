/**
 * The figures of one scenario, from what every replica reported and what the runner did.
 *
 * Fills per key, fleet-wide: the fills of one key summed over every replica. The promise is one
 * fill per key wherever the lock can be reached. A key counts as "in the fault" when its fills
 * span the fault window: from the moment the fault began until it was repaired or the last store
 * error any replica reported (a breaker still open after a stall keeps the lock out of reach), or
 * when the scenario put the key out of the lock's reach on purpose (garbage at its lock key).
 * Every other key is held to one fill. Keys only ever stampede in their own epoch (see
 * protocol.ts), so a refill after data was lost is not mistaken for a second fill.
 */
import type { LoadReport } from './protocol';

/** When the fault was on (epoch ms), as the runner saw it. */
export interface FaultWindow {
  readonly from: number;
  readonly to: number;
}

export interface Figures {
  readonly loads: number;
  readonly failed: number;
  readonly failures: readonly string[];
  /** Keys held to one fill, and the most fills any of them had. */
  readonly reachableKeys: number;
  readonly reachableMaxFills: number;
  readonly reachableOver: number;
  /** Keys in the fault, their fills in total and the most any had. */
  readonly faultKeys: number;
  readonly faultFills: number;
  readonly faultMaxFills: number;
  /** Longest load minus the fill time (what a load that fills pays anyway), ms. */
  readonly maxAddedLatencyMs: number;
  readonly locksLeft: number;
  /** Loads that waited on a lock until lockWaitTimeout, fleet-wide. */
  readonly lockTimeouts: number;
  readonly storeErrors: Readonly<Record<string, number>>;
  /** The window as measured, relative to the start of the load (ms), for the notes. */
  readonly window?: { readonly from: number; readonly to: number };
}

export interface FigureInput {
  readonly reports: readonly LoadReport[];
  readonly startedAt: number;
  readonly fillMs: number;
  readonly window?: FaultWindow;
  /** Keys out of the lock's reach by construction, whatever the window. */
  readonly unreachable?: ReadonlySet<string>;
  readonly locksLeft: number;
}

export function figures(input: FigureInput): Figures {
  const { reports, fillMs } = input;
  const fills = new Map<string, number[]>();
  const storeErrors: Record<string, number> = {};
  let lastStoreError = -Infinity;
  for (const report of reports) {
    for (const [key, starts] of Object.entries(report.fills)) {
      const all = fills.get(key);
      if (all === undefined) fills.set(key, [...starts]);
      else all.push(...starts);
    }
    for (const [code, count] of Object.entries(report.storeErrorCodes))
      storeErrors[code] = (storeErrors[code] ?? 0) + count;
    for (const time of report.storeErrorTimes) if (time > lastStoreError) lastStoreError = time;
  }
  const window =
    input.window === undefined ? undefined : { from: input.window.from, to: Math.max(input.window.to, lastStoreError) };

  let reachableKeys = 0;
  let reachableMaxFills = 0;
  let reachableOver = 0;
  let faultKeys = 0;
  let faultFills = 0;
  let faultMaxFills = 0;
  for (const [key, starts] of fills) {
    const first = Math.min(...starts);
    const last = Math.max(...starts) + fillMs;
    const inFault =
      input.unreachable?.has(key) === true || (window !== undefined && first <= window.to && last >= window.from);
    if (inFault) {
      faultKeys++;
      faultFills += starts.length;
      faultMaxFills = Math.max(faultMaxFills, starts.length);
    } else {
      reachableKeys++;
      reachableMaxFills = Math.max(reachableMaxFills, starts.length);
      if (starts.length > 1) reachableOver++;
    }
  }
  return {
    loads: sum(reports, (r) => r.loads),
    failed: sum(reports, (r) => r.failed),
    failures: reports.flatMap((r) => r.failures).slice(0, 5),
    reachableKeys,
    reachableMaxFills,
    reachableOver,
    faultKeys,
    faultFills,
    faultMaxFills,
    maxAddedLatencyMs: Math.max(0, Math.max(...reports.map((r) => r.maxLatencyMs)) - fillMs),
    locksLeft: input.locksLeft,
    lockTimeouts: sum(reports, (r) => r.lockTimeouts),
    storeErrors,
    window: window === undefined ? undefined : { from: window.from - input.startedAt, to: window.to - input.startedAt },
  };
}

function sum<T>(items: readonly T[], of: (item: T) => number): number {
  let total = 0;
  for (const item of items) total += of(item);
  return total;
}

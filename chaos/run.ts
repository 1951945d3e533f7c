/**
 * npm run chaos [-- --quick] [-- --only name,name] [-- --strict] [-- --packed] [-- --ioredis-defaults]
 *
 * The fleet guarantee under real faults: real redis-server processes (started here, on free
 * 127.0.0.1 ports), a fleet of replica processes under steady load, and one fault per scenario.
 * One line per scenario: loads, failed loads, fills per key (fleet-wide) where the lock is reachable
 * and in the fault, the most latency a load paid beyond its fill, locks left behind.
 *
 * Hard invariants (exit code 1): no failed load; no lock left behind once the fleet is idle; every
 * scenario ran. "1 fill per key where the lock is reachable" is flagged when it does not hold, and
 * fails the run with --strict.
 *
 * --packed: the replicas load the package from the tarball `npm pack` makes (packed.ts), not src/.
 * --ioredis-defaults: the replicas' clients keep ioredis's own retryStrategy (backing off to 2 s)
 * instead of the README's short one: the recovery a user who skips that option gets.
 *
 * Bounded: every scenario's load runs a fixed time (--quick: about 40 s in all), the whole run
 * has a deadline, and every process started here is killed when the run ends, however it ends.
 */
import { startFleet, type Replica } from './fleet';
import { GARBAGE_SCENARIOS } from './garbage';
import type { Figures } from './figures';
import { installPacked } from './packed';
import { killAll } from './processes';
import { RECOVERY_SCENARIOS } from './recovery';
import { SCENARIOS, type Outcome, type Scenario } from './scenarios';
import { settleRound } from './settle';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const strict = args.includes('--strict');
const packed = args.includes('--packed');
// Read by the replica processes (replica.ts), which inherit this environment.
if (args.includes('--ioredis-defaults')) process.env.HERDCACHE_CHAOS_IOREDIS_DEFAULTS = '1';
const onlyIndex = args.indexOf('--only');
const only =
  onlyIndex === -1 ? undefined : (args[onlyIndex + 1] ?? '').split(',').map((name) => name.trim().toLowerCase());

const DEADLINE_MS = quick ? 180_000 : 600_000;

const ALL: readonly Scenario[] = [...SCENARIOS, ...RECOVERY_SCENARIOS, ...GARBAGE_SCENARIOS];

const COLUMNS = ['scenario', 'loads', 'failed', 'fills/key ok', 'fills/key fault', '+latency', 'locks left'] as const;
const WIDTHS = [28, 7, 7, 16, 22, 10, 10];

function row(cells: readonly string[]): string {
  return cells.map((cell, i) => (i === 0 ? cell.padEnd(WIDTHS[i]!) : cell.padStart(WIDTHS[i]!))).join(' ');
}

function describe(f: Figures): string[] {
  const ok = f.reachableKeys === 0 ? '-' : `${f.reachableMaxFills} (${f.reachableKeys} keys)`;
  const fault =
    f.faultKeys === 0
      ? '-'
      : `max ${f.faultMaxFills}, +${((f.faultFills - f.faultKeys) / f.faultKeys).toFixed(2)}/key (${f.faultKeys})`;
  return [String(f.loads), String(f.failed), ok, fault, `${f.maxAddedLatencyMs} ms`, String(f.locksLeft)];
}

interface Verdict {
  readonly hard: string[];
  readonly flags: string[];
}

function judge(name: string, outcome: Outcome): Verdict {
  const f = outcome.figures;
  const hard: string[] = [];
  const flags: string[] = [];
  if (f.loads === 0) hard.push(`${name}: no load ran`);
  if (f.failed > 0) hard.push(`${name}: ${f.failed} failed loads (${f.failures.join(' | ')})`);
  if (f.locksLeft > 0)
    (outcome.locksExplained === undefined ? hard : flags).push(
      `${name}: ${outcome.locksExplained ?? `${f.locksLeft} locks left behind`}`,
    );
  for (const flag of outcome.flags ?? []) flags.push(`${name}: ${flag}`);
  if (f.reachableMaxFills > 1)
    flags.push(
      `${name}: ${f.reachableOver} of ${f.reachableKeys} keys filled more than once (max ${f.reachableMaxFills}) while the lock was reachable`,
    );
  return { hard, flags };
}

async function main(): Promise<number> {
  const scenarios =
    only === undefined ? ALL : ALL.filter((s) => only.some((name) => s.name.toLowerCase().includes(name)));
  const wantsSettle = only === undefined || only.includes('settle');
  if (scenarios.length === 0 && !wantsSettle) {
    console.error(
      `no scenario matches --only ${only?.join(',')}; scenarios: settle, ${ALL.map((s) => s.name).join(', ')}`,
    );
    return 2;
  }
  const started = Date.now();
  // Every promise settles (seeded, in process): first, as it needs no fleet.
  const settleFailures = wantsSettle ? await settleRound(quick) : [];
  // Before the fleet is forked: the replicas read where the package is from the environment.
  if (packed) console.log(`replicas load the packed package: ${installPacked()}`);
  const fleet: Replica[] =
    scenarios.length === 0 ? [] : await startFleet(Math.max(...scenarios.map((s) => s.replicas)));
  console.log(
    `herdcache chaos (${quick ? 'quick' : 'full'}): ${scenarios.length} scenarios, ${fleet.length} replica processes, library defaults`,
  );
  console.log(row(COLUMNS));
  const hard: string[] = [...settleFailures];
  const flags: string[] = [];
  for (const scenario of scenarios) {
    const began = Date.now();
    let outcome: Outcome;
    try {
      outcome = await scenario.run({ quick, fleet });
    } catch (error) {
      hard.push(`${scenario.name}: did not run: ${error instanceof Error ? error.message : String(error)}`);
      console.log(row([scenario.name, 'ERROR', '', '', '', '', '']));
      continue;
    }
    const verdict = judge(scenario.name, outcome);
    hard.push(...verdict.hard);
    flags.push(...verdict.flags);
    const mark = verdict.hard.length > 0 ? '  FAIL' : verdict.flags.length > 0 ? '  FLAG' : '';
    console.log(row([scenario.name, ...describe(outcome.figures)]) + mark);
    const codes = Object.entries(outcome.figures.storeErrors)
      .map(([code, count]) => `${code} ${count}`)
      .join(', ');
    const window = outcome.figures.window;
    const detail = [
      ...outcome.notes,
      window === undefined
        ? undefined
        : `lock out of reach +${(window.from / 1000).toFixed(1)}..+${(window.to / 1000).toFixed(1)} s`,
      codes === '' ? 'no store errors' : `store errors: ${codes}`,
      `${outcome.figures.lockTimeouts} lock waits timed out`,
      `${((Date.now() - began) / 1000).toFixed(1)} s`,
    ].filter((note) => note !== undefined);
    console.log(`    ${detail.join('; ')}`);
  }
  for (const replica of fleet) replica.exit();
  console.log(`\n${((Date.now() - started) / 1000).toFixed(1)} s`);
  for (const flag of flags) console.log(`FLAG ${flag}`);
  for (const failure of hard) console.log(`FAIL ${failure}`);
  if (hard.length > 0) return 1;
  if (strict && flags.length > 0) return 1;
  return 0;
}

const deadline = setTimeout(() => {
  console.error(`chaos: deadline of ${DEADLINE_MS / 1000} s reached; killing everything`);
  killAll();
  process.exit(1);
}, DEADLINE_MS);
deadline.unref();

main().then(
  (code) => {
    killAll();
    process.exit(code);
  },
  (error: unknown) => {
    console.error(error);
    killAll();
    process.exit(1);
  },
);

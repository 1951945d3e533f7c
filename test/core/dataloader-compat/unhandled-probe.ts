/**
 * Run as its own process (jest turns an unhandled rejection into a failure of its own, so it
 * cannot be observed in-process): `tsx unhandled-probe.ts <implementation>` runs each scenario in
 * turn and prints, as JSON, what Node reported for it: "unhandled: <message>" or "none".
 *   rejected-load: a load whose batch returns an Error for it, that nobody handles;
 *   primed-error:  a loader primed with an Error that is never loaded.
 */
import { implementations } from './adapter';

const impl = implementations.find((candidate) => candidate.name === process.argv[2]);
if (impl === undefined) throw new Error(`unknown implementation ${process.argv[2]}`);

let seen: string[] = [];
process.on('unhandledRejection', (reason) => void seen.push(reason instanceof Error ? reason.message : String(reason)));

const scenarios: Record<string, () => void> = {
  'rejected-load': () => {
    const loader = impl.perRequest<string, string>(async (keys) => keys.map((key) => new Error(`no ${key}`)))();
    void loader.load('a');
  },
  'primed-error': () => {
    const loader = impl.perRequest<string, string>(async (keys) => keys)();
    loader.prime('a', new Error('primed'));
  },
};

async function main(): Promise<void> {
  const report: Record<string, string> = {};
  for (const [name, run] of Object.entries(scenarios)) {
    seen = [];
    run();
    await new Promise((resolve) => setTimeout(resolve, 50));
    report[name] = seen.length === 0 ? 'none' : `unhandled: ${seen.join(', ')}`;
  }
  console.log(JSON.stringify(report));
}

void main();

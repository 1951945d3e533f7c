/**
 * Memory bounded in bytes. Distinct client-derived strings of 1 MiB each, sent through each path of
 * the library that keeps something per key (memory store keys and values, PRIVATE sessions and
 * parent identities in @cached keys, loader key memos, invalidated tags), must leave the heap less
 * than 128 MiB larger after GC (200 of them), less than 16 MiB where only keys are kept (64 of
 * them), the cache still alive. Before keys were bounded and the store counted bytes, each string
 * was kept once (twice by a stored loader and by a @cached field's key memo).
 *
 * Measured in a child process (test/abuse/retained-request.ts) run with --expose-gc, so the heap
 * is this scenario's alone; what is counted is calls and heap after GC, never time.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

interface Retained {
  scenario: string;
  retainedMiB: number;
  calls: number;
  errors: string[];
  bypassed: string[];
  entries: number;
  calculatedSize: number;
  tagCount: number;
}

const MIB = 1 << 20;
/** The figure: 200 distinct 1 MiB strings (more than the 64 MiB store default can hold). */
const COUNT = 200;
/** Where only keys are kept, fewer strings tell as well (64 MiB kept before, under 16 now). */
const KEY_COUNT = 64;

/** Bounds a hang, not slowness: a loaded machine ran the seven scenarios in 40 s to 240 s. */
const CHILD_TIMEOUT = 600_000;

async function retained(scenarios: string[], count: number): Promise<Map<string, Retained>> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      '--expose-gc',
      '--max-old-space-size=512',
      '--import',
      'tsx',
      join(__dirname, 'retained-request.ts'),
      scenarios.join(','),
      String(count),
      String(MIB),
    ],
    { cwd: join(__dirname, '../..'), timeout: CHILD_TIMEOUT, maxBuffer: 1 << 20 },
  );
  const lines = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Retained);
  return new Map(lines.map((line) => [line.scenario, line]));
}

describe('distinct 1 MiB strings from clients', () => {
  let results: Map<string, Retained>;
  beforeAll(
    async () => {
      const values = await retained(['field-values', 'coalesce-only', 'tags'], COUNT);
      const keys = await retained(['private-sessions', 'field-identities', 'raw-keys', 'loader-keys'], KEY_COUNT);
      results = new Map([...values, ...keys]);
    },
    2 * CHILD_TIMEOUT + 60_000,
  );

  it('as 1 MiB values of a @cached field: the memory store keeps its 64 MiB default, not 200 MiB', () => {
    const r = results.get('field-values')!;
    expect(r.errors).toEqual([]);
    expect(r.calls).toBe(COUNT);
    expect(r.calculatedSize).toBeLessThanOrEqual(64 * MIB);
    expect(r.entries).toBeLessThan(COUNT); // the oldest were evicted by bytes, not by count
    expect(r.retainedMiB).toBeLessThan(128);
  });

  it('as session ids of a PRIVATE @cached field: keys are held as digests', () => {
    const r = results.get('private-sessions')!;
    expect(r.errors).toEqual([]);
    expect(r.calls).toBe(KEY_COUNT);
    expect(r.entries).toBe(KEY_COUNT);
    expect(r.retainedMiB).toBeLessThan(16);
  });

  it('as parent identities of a @cached field: keys are held as digests, the per-field key memo keeps no long identity', () => {
    const r = results.get('field-identities')!;
    expect(r.errors).toEqual([]);
    expect(r.calls).toBe(KEY_COUNT);
    expect(r.entries).toBe(KEY_COUNT);
    expect(r.retainedMiB).toBeLessThan(16);
  });

  it('as getOrCompute keys: keys are held as digests', () => {
    const r = results.get('raw-keys')!;
    expect(r.calls).toBe(KEY_COUNT);
    expect(r.entries).toBe(KEY_COUNT);
    expect(r.retainedMiB).toBeLessThan(16);
  });

  it('as keys of a coalesce-only loader: its key memo keeps no long key', () => {
    const r = results.get('coalesce-only')!;
    expect(r.calls).toBe(COUNT);
    expect(r.entries).toBe(0);
    expect(r.retainedMiB).toBeLessThan(16);
  });

  it('as keys of a loader with ttl: neither its key memo nor the store keeps a long key', () => {
    const r = results.get('loader-keys')!;
    expect(r.calls).toBe(KEY_COUNT);
    expect(r.entries).toBe(KEY_COUNT);
    expect(r.retainedMiB).toBeLessThan(16);
  });

  it('as tags: entries carrying them stay within maxSize, and the invalidated ones are noted by their digests', () => {
    const r = results.get('tags')!;
    expect(r.calls).toBe(COUNT);
    expect(r.calculatedSize).toBeLessThanOrEqual(64 * MIB);
    expect(r.tagCount).toBe(COUNT - 1);
    expect(r.retainedMiB).toBeLessThan(128);
  });
});

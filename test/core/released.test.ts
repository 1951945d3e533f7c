/**
 * Values the cache no longer holds are collected: measured in a child process run with
 * --expose-gc (test/core/released-child.ts), counting which values are still alive after GC.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

let alive: Record<string, string[]>;

beforeAll(async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', join(__dirname, 'released-child.ts')],
    { cwd: join(__dirname, '../..'), timeout: 120_000 },
  );
  alive = JSON.parse(stdout.trim()) as Record<string, string[]>;
}, 150_000);

describe('values the cache no longer holds are collected', () => {
  it('an invalidated value, the last one filled included', () => {
    expect(alive.invalidated).toEqual([]);
  });

  it('a value evicted after a slot read it', () => {
    expect(alive['evicted-slot']).toEqual([]);
  });

  it('values invalidated while another fill still runs', () => {
    expect(alive['invalidated-while-filling']).toEqual([]);
  });

  it('what a fill closed over, once answered, while a fill of its batch still runs', () => {
    expect(alive['closures-of-a-batch']).toEqual([]);
  });
});

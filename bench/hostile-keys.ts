/**
 * Figures for docs/security.md: one hostile request (`q(l: [$s, $s, …])`, N references to one
 * large variable) against a plain field and a @cached one, each in a child process with a 512 MiB
 * heap (test/abuse/hostile-request.ts runs it twice: cold, then again), memory store and Redis.
 * Prints time, heap after GC and peak RSS per case, or how the child died. Then what the cache
 * keeps: 200 distinct 1 MiB strings sent through each path that keeps something per key
 * (test/abuse/retained-request.ts, one child with --expose-gc), the heap growth after GC.
 *
 * npx tsx bench/hostile-keys.ts
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startRedisServer } from '../test/setup/redis-server';

interface Case {
  name: string;
  args: string[];
}

function runCase(args: string[]): Promise<string> {
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--max-old-space-size=512',
        '--expose-gc',
        '--import',
        'tsx',
        join(__dirname, '../test/abuse/hostile-request.ts'),
        ...args,
      ],
      { timeout: 60_000, maxBuffer: 1 << 20 },
      (error, stdout) => {
        const wall = ((performance.now() - started) / 1000).toFixed(1);
        if (error !== null) {
          resolve(
            `died after ${wall} s (${error.signal ?? `exit ${String(error.code)}`}${error.killed ? ', killed at the 60 s bound' : ''})`,
          );
          return;
        }
        const r = JSON.parse(stdout.trim().split('\n').pop()!) as {
          ms: number;
          heapMiB: number;
          maxRssMiB: number;
          bypassed: string[];
          calls: number;
        };
        resolve(
          `2 requests in ${r.ms.toFixed(0)} ms · heap after GC ${r.heapMiB.toFixed(1)} MiB · peak RSS ${r.maxRssMiB.toFixed(0)} MiB · resolver calls ${r.calls} · bypassed ${JSON.stringify(r.bypassed)} (child wall ${wall} s)`,
        );
      },
    );
  });
}

const RETAINED = [
  'field-args',
  'field-values',
  'private-sessions',
  'field-identities',
  'raw-keys',
  'coalesce-only',
  'loader-keys',
  'tags',
];

function retained(): Promise<string[]> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--max-old-space-size=1024',
        '--expose-gc',
        '--import',
        'tsx',
        join(__dirname, '../test/abuse/retained-request.ts'),
        RETAINED.join(','),
        '200',
        String(1 << 20),
      ],
      { timeout: 600_000, maxBuffer: 1 << 20 },
      (error, stdout) => {
        if (error !== null) {
          resolve([`died (${error.signal ?? `exit ${String(error.code)}`})`]);
          return;
        }
        resolve(
          stdout
            .trim()
            .split('\n')
            .map((line) => {
              const r = JSON.parse(line) as {
                scenario: string;
                retainedMiB: number;
                entries: number;
                calculatedSize: number;
                calls: number;
              };
              return `${r.scenario}: ${r.retainedMiB.toFixed(1)} MiB retained · ${r.entries} entries, ${(r.calculatedSize / 2 ** 20).toFixed(1)} MiB estimated · ${r.calls} calls`;
            }),
        );
      },
    );
  });
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  try {
    const mib = String(1 << 20);
    const cases: Case[] = [
      { name: 'plain field, 2,000 × 1 MiB, memory', args: ['plain', '2000', mib] },
      { name: '@cached, 2,000 × 1 MiB, memory', args: ['cached', '2000', mib] },
      { name: '@cached, 200 × 1 MiB, Redis', args: ['cached', '200', mib, server.url] },
      { name: '@cached, 100 × 300 chars (cached, hashed key), Redis', args: ['cached', '100', '300', server.url] },
    ];
    for (const c of cases) console.log(`- ${c.name}: ${await runCase(c.args)}`);
    console.log('\nRetained after 200 distinct 1 MiB strings (heap growth after GC, cache alive):');
    for (const line of await retained()) console.log(`- ${line}`);
  } finally {
    await server.stop();
  }
}

void main();

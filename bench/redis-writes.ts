/**
 * Figures for docs/redis.md, "The write path": what a fenced write costs, measured in one run on a
 * throwaway redis-server of its own (nothing else counts in its stats).
 *
 * 1. One write per turn: 50 cold getOrCompute siblings whose fills each await a 5 ms timer →
 *    write scripts sent (INFO commandstats), and a lone fenced write's round trip as shipped
 *    (flushed at the end of the turn, setImmediate) against the same write sent at once
 *    (flushWrites() right after the call): the difference is the added latency.
 *
 * npx tsx bench/redis-writes.ts
 */
import Redis from 'ioredis';
import { createCache } from '../src/core';
import { redisStore } from '../src/redis';
import { startRedisServer } from '../test/setup/redis-server';
import { latency } from './lib/stats';

async function commandCalls(client: Redis): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const line of (await client.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match) calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

async function oneWritePerTurn(url: string): Promise<void> {
  const client = new Redis(url);
  const admin = new Redis(url);
  const store = redisStore({ client, prefix: 'bench-writes:', subscriber: false });
  const cache = createCache({ store, ttl: 60_000 });
  // Warm the scripts (EVAL once per connection, EVALSHA after).
  await cache.getOrCompute('warm', async () => 1);
  await store.getMany(['warm']);
  // 20 runs: the 50 timers are due in one turn when they were started within one millisecond.
  const writeScripts: number[] = [];
  for (let run = 0; run < 20; run++) {
    await admin.config('RESETSTAT');
    const siblings = Array.from({ length: 50 }, (_, i) => `sibling:${run}:${i}`);
    await Promise.all(
      siblings.map((key, i) =>
        cache.getOrCompute(key, () => new Promise((resolve) => setTimeout(() => resolve(i), 5))),
      ),
    );
    await store.getMany(['flush']);
    writeScripts.push(((await commandCalls(admin)).evalsha ?? 0) - 1);
  }
  const runs = new Map<number, number>();
  for (const n of writeScripts) runs.set(n, (runs.get(n) ?? 0) + 1);
  console.log(
    `50 cold siblings, fills awaiting a 5 ms timer, 20 runs: 1 lock script + write scripts per run ${[...runs]
      .sort((a, b) => a[0] - b[0])
      .map(([n, count]) => `${n} (${count}×)`)
      .join(', ')}`,
  );

  const rounds = 3000;
  const timings = { turn: [] as number[], now: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 === 0 ? (['turn', 'now'] as const) : (['now', 'turn'] as const)) {
      const key = `lone:${mode}:${round}`;
      const token = `t${round}`;
      await store.lock.acquire([key], token, 10_000);
      const started = performance.now();
      const written = store.lock.writeAndRelease(
        [
          {
            key,
            entry: { value: round, freshUntil: Date.now() + 60_000, staleUntil: Date.now() + 60_000 },
            ttl: 60_000,
          },
        ],
        token,
      );
      if (mode === 'now') (store.lock as unknown as { flushWrites(): void }).flushWrites();
      await written;
      timings[mode].push(performance.now() - started);
    }
  }
  const turn = latency(timings.turn);
  const now = latency(timings.now);
  console.log(
    `lone fenced write, ${rounds} each, interleaved: end of turn p50 ${turn.p50.toFixed(3)} ms p99 ${turn.p99.toFixed(3)} ms; sent at once p50 ${now.p50.toFixed(3)} ms p99 ${now.p99.toFixed(3)} ms; added p50 ${(turn.p50 - now.p50).toFixed(3)} ms (ratio ${(turn.p50 / now.p50).toFixed(2)})`,
  );
  await cache.close();
  client.disconnect();
  admin.disconnect();
}

async function main(): Promise<void> {
  const server = await startRedisServer();
  try {
    await oneWritePerTurn(server.url);
  } finally {
    await server.stop();
  }
}

void main();

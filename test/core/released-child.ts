/**
 * Run by released.test.ts in a child with --expose-gc: whether values the cache no longer holds
 * are collected. Prints one JSON line: scenario → the values still alive after GC.
 * - invalidated: the last two values filled, both invalidated (the last promise made kept its
 *   value alive through a module-level resolve, until the next fill);
 * - evicted-slot: a @cached-style slot read of a value then evicted (a slot must not keep it);
 * - invalidated-while-filling: 50 values filled and invalidated while another fill runs (the
 *   flight table kept its ended flights, and their values, until every fill had ended);
 * - closures-of-a-batch: 20 fills answered while a fill dispatched with them runs on (their items
 *   kept each fill function, and what it closed over, until the batch's last fill ended).
 */
import { createCache } from '../../src/core/cache';
import { MemoKey } from '../../src/core/memo';
import { memoryStore } from '../../src/core/memory';

const alive = new Set<string>();
const registry = new FinalizationRegistry<string>((id) => alive.delete(id));
function big(id: string): number[] {
  const value = new Array<number>(100_000).fill(1);
  alive.add(id);
  registry.register(value, id);
  return value;
}

async function collected(): Promise<void> {
  for (let i = 0; i < 6; i++) {
    global.gc!();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function main(): Promise<void> {
  const out: Record<string, string[]> = {};

  const cache = createCache({ store: memoryStore({ max: 10 }), ttl: 600_000 });
  await cache.getOrCompute('a', async () => big('a'));
  await cache.getOrCompute('b', async () => big('b'));
  await cache.invalidate(['a', 'b']);
  await collected();
  out.invalidated = [...alive].sort();
  alive.clear();

  const store = memoryStore({ max: 1 });
  const slot = new MemoKey('x');
  await store.setMany([
    { key: 'x', entry: { value: big('x'), freshUntil: Infinity, staleUntil: Infinity }, ttl: Infinity },
  ]);
  store.readSlot(slot);
  await store.setMany([{ key: 'y', entry: { value: 0, freshUntil: Infinity, staleUntil: Infinity }, ttl: Infinity }]);
  await collected();
  out['evicted-slot'] = [...alive].sort();

  alive.clear();

  let finish: (value: number) => void = () => {};
  const running = cache.getOrCompute('slow', () => new Promise<number>((resolve) => (finish = resolve)));
  // Dispatched alone: the values of keys dispatched with a fill stay reachable until it ends.
  await new Promise((resolve) => setImmediate(resolve));
  for (let i = 0; i < 50; i++) await cache.getOrCompute(`v${i}`, async () => big(`v${i}`));
  await cache.invalidate(Array.from({ length: 50 }, (_, i) => `v${i}`));
  await collected();
  out['invalidated-while-filling'] = [...alive].sort();
  finish(1);
  await running;

  // Fills dispatched in the same tick as one that runs on: each is answered, and what its closure
  // holds (a request, for the response layer's fill) is let go, though the batch's dispatch waits
  // for the slow one still.
  alive.clear();
  let finishSlow: (value: number) => void = () => {};
  const slow = cache.getOrCompute('slow2', () => new Promise<number>((resolve) => (finishSlow = resolve)));
  await Promise.all(
    Array.from({ length: 20 }, (_, i) => {
      const held = big(`held${i}`);
      return cache.getOrCompute(`q${i}`, async () => held.length + i);
    }),
  );
  await collected();
  out['closures-of-a-batch'] = [...alive].sort();
  finishSlow(1);
  await slow;

  process.stdout.write(`${JSON.stringify(out)}\n`);
  await cache.close();
}

void main();

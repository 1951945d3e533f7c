/**
 * TurnSets (src/redis/turn-sets.ts) on its own: the setMany calls of one turn leave in one send at
 * the turn's end, or before it when flushed; each caller gets its own outcome when the send failed
 * on some Cluster masters only. The send is the test's: the Redis side is in round-trips.test.ts.
 */
import { StorePartialError } from '../../src/core/errors';
import type { StoreWrite } from '../../src/core/store';
import { TurnSets } from '../../src/redis/turn-sets';
import { entry } from './helpers';

const write = (key: string): StoreWrite => ({ key, entry: entry(key), ttl: 1000, since: 0 });

it('gathers the calls of one turn into one send, in the order they came', async () => {
  const sends: string[][] = [];
  const sets = new TurnSets(async (writes) => void sends.push(writes.map((w) => w.key)));
  const done = [sets.add([write('a')]), sets.add([write('b'), write('c')])];
  expect(sets.sent()).toBeDefined();
  expect(sends).toEqual([]); // not before the turn ends
  await Promise.all(done);
  expect(sends).toEqual([['a', 'b', 'c']]);
  expect(sets.sent()).toBeUndefined();
});

it('flush() sends what waits at once; sent() settles once it is handed over', async () => {
  const sends: string[][] = [];
  const sets = new TurnSets(async (writes) => void sends.push(writes.map((w) => w.key)));
  const done = sets.add([write('a')]);
  const sent = sets.sent()!;
  sets.flush();
  expect(sends).toEqual([['a']]);
  await sent;
  await done;
  sets.flush(); // nothing waits: no send
  expect(sends).toHaveLength(1);
});

it('a send failed on some masters: the callers whose writes went there reject, the others resolve', async () => {
  const failure = new Error('master down');
  // Positions in the turn's writes: b (the second caller's first) failed.
  const sets = new TurnSets(async () => {
    throw new StorePartialError(failure, undefined, 'partial', [1]);
  });
  const first = sets.add([write('a')]);
  const second = sets.add([write('b'), write('c')]);
  const third = sets.add([write('d')]);
  await expect(first).resolves.toBeUndefined();
  await expect(second).rejects.toBeInstanceOf(StorePartialError);
  await expect(third).resolves.toBeUndefined();
});

it('a send that fails whole (or throws before its first await) rejects every caller', async () => {
  const boom = new Error('boom');
  const sets = new TurnSets(() => {
    throw boom;
  });
  const calls = [sets.add([write('a')]), sets.add([write('b')])];
  for (const call of calls) await expect(call).rejects.toBe(boom);
});

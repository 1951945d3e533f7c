/**
 * FlightTable keeps one flight per key. LoadPath starts a key's next flight only once the table
 * holds none, but the table does not rely on it: an ending flight never removes a newer flight of
 * its key (without the identity check, the newer one would be lost and a third caller would start
 * a second fill of the key).
 */
import { FlightTable } from '../../src/core/flight-table';

it('an ending flight leaves a newer flight of its key in the table', () => {
  const table = new FlightTable();
  const older = table.start('k', false, undefined);
  const newer = table.start('k', false, undefined);
  expect(table.get('k')).toBe(newer);
  table.resolve(older, 'old');
  expect(table.get('k')).toBe(newer);
  expect(table.size).toBe(1);
  table.resolve(newer, 'new');
  expect(table.get('k')).toBeUndefined();
  expect(table.size).toBe(0);
});

it('a flight resolved, failed or abandoned leaves the table', () => {
  const table = new FlightTable();
  const a = table.start('a', false, undefined);
  const b = table.start('b', false, undefined);
  const c = table.start('c', false, undefined);
  table.resolve(a, 1);
  table.fail(b, new Error('x'));
  table.abandon(c, new Error('gone'));
  expect([table.get('a'), table.get('b'), table.get('c'), table.size]).toEqual([undefined, undefined, undefined, 0]);
});

it('ended flights stay until a sweep: at once when every entry ended, and at most about twice the pending ones otherwise', () => {
  const table = new FlightTable();
  const batch = Array.from({ length: 100 }, (_, i) => table.start(`k${i}`, false, undefined));
  for (const flight of batch.slice(0, 99)) table.resolve(flight, 1);
  expect([table.size, table.held, table.get('k0'), table.get('k99')]).toEqual([1, 100, undefined, batch[99]]);
  table.resolve(batch[99]!, 1); // the last one: swept
  expect([table.size, table.held]).toEqual([0, 0]);

  const stuck = Array.from({ length: 10 }, (_, i) => table.start(`stuck${i}`, false, undefined));
  for (let i = 0; i < 20_000; i++) table.resolve(table.start(`churn${i}`, false, undefined), i);
  expect(table.size).toBe(10);
  expect(table.held).toBeLessThanOrEqual(1024 + 10);
  for (const flight of stuck) expect(table.get(flight.key)).toBe(flight);
});

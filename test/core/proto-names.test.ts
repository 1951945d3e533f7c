/**
 * A loader named `__proto__`, or a getOrCompute label `__proto__`, is a source like any other:
 * its counts are an own entry of metrics().sources, of a request scope's stats and of an
 * operation's report. Assigned plainly, the name set the object's prototype: the entry was
 * missing (sources no longer added up to the total), and the report wrote its row onto
 * Object.prototype.
 */
import { createCache } from '../../src/core/cache';
import { herdcacheContext } from '../../src/graphql/request';
import { cacheReport } from '../../src/graphql';

type Row = { hits: number; misses: number };
const loads = (row: Row) => row.hits + row.misses;
const sum = (sources: Record<string, Row>) => Object.values(sources).reduce((total, row) => total + loads(row), 0);

it('metrics, a scope and a report count a __proto__ source as their own entry', async () => {
  const cache = createCache({ ttl: 60_000 });
  const users = cache.loader<number, string>({ name: '__proto__', batch: async (ids) => ids.map(String) });
  await users.load(1);
  await users.load(1);
  await cache.getOrCompute('j', async () => 'w', { label: 'other' });
  const metrics = cache.metrics();
  expect(Object.prototype.hasOwnProperty.call(metrics.sources, '__proto__')).toBe(true);
  expect(Object.getPrototypeOf(metrics.sources)).toBe(Object.prototype);
  expect(sum(metrics.sources)).toBe(loads(metrics.total));
  expect(loads(metrics.total)).toBe(3);
  // A label of that name (on a cache without such a loader).
  const labelled = createCache({ ttl: 60_000 });
  await labelled.getOrCompute('k', async () => 'v', { label: '__proto__' });
  const byLabel = labelled.metrics();
  expect(byLabel.sources.__proto__?.misses).toBe(1);
  expect(sum(byLabel.sources)).toBe(loads(byLabel.total));
  await labelled.close();

  const context = herdcacheContext({ cache, loaders: { users } });
  await context.loaders.users.load(2);
  const stats = context.scope.stats();
  expect(Object.prototype.hasOwnProperty.call(stats.sources, '__proto__')).toBe(true);
  expect(sum(stats.sources)).toBe(loads(stats.total));

  const report = cacheReport(context);
  expect(report).toBeDefined();
  expect(Object.prototype.hasOwnProperty.call(report!.sources, '__proto__')).toBe(true);
  expect(({} as Record<string, unknown>).hits).toBeUndefined(); // nothing written onto Object.prototype
  await cache.close();
});

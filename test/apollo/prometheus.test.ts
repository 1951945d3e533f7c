/** Prometheus metrics through the plugin: names, labels, the operation label cap, the fill histogram, no global registry. */
import { Registry, register as globalRegistry } from 'prom-client';
import { createCache } from '../../src/core/cache';
import { COUNTER_METRICS, FILL_DURATION_METRIC, prometheusMetrics } from '../../src/prometheus/metrics';
import { fixture } from './fixtures';

/** prom-client's values; a histogram's carry metricName (name_bucket, name_sum, name_count). */
async function valuesOf(
  registry: Registry,
  name: string,
): Promise<{ labels: Partial<Record<string, string | number>>; value: number; metricName?: string }[]> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`${name} is not registered`);
  return (await metric.get()).values;
}

/** counter value per `operation` label (summed over sources). */
async function byOperation(registry: Registry, name: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const { labels, value } of await valuesOf(registry, name))
    out[String(labels.operation)] = (out[String(labels.operation)] ?? 0) + value;
  return out;
}

describe('Prometheus metrics', () => {
  it('registers the documented metrics on the given registry only', async () => {
    const registry = new Registry();
    const { server } = fixture({ registry });
    await server.start();
    try {
      const names = (await registry.getMetricsAsJSON()).map((m) => m.name).sort();
      expect(names).toEqual([
        'herdcache_bypassed_total',
        'herdcache_coalesced_total',
        'herdcache_fill_duration_seconds',
        'herdcache_fill_failures_total',
        'herdcache_fills_total',
        'herdcache_hits_total',
        'herdcache_lock_contended_total',
        'herdcache_misses_total',
        'herdcache_responses_total',
        'herdcache_stale_served_total',
      ]);
      for (const name of names) expect(globalRegistry.getSingleMetric(name)).toBeUndefined();
    } finally {
      await server.stop();
    }
  });

  it('counts per {operation, source}; caps operation names ("other"), names anonymous ones ("anonymous")', async () => {
    const registry = new Registry();
    const { server, context } = fixture({ registry, maxOperationLabels: 2, extensions: false });
    await server.start();
    try {
      const ops = [
        'query A { hot { value } }',
        'query B { hot { value } }',
        'query C { hot { value } }',
        'query D { hot { value } }',
        '{ hot { value } }',
        'query A { hot { value } }',
      ];
      for (const query of ops) await server.executeOperation({ query }, { contextValue: context() });
      // The user loader and User.score under one operation, to see several sources.
      await server.executeOperation({ query: 'query B { user(id: "5") { score } }' }, { contextValue: context() });
      expect(await byOperation(registry, 'herdcache_misses_total')).toEqual({ A: 1, B: 2 });
      expect(await byOperation(registry, 'herdcache_hits_total')).toEqual({ B: 1, other: 2, anonymous: 1, A: 1 });
      expect(await byOperation(registry, 'herdcache_fills_total')).toEqual({ A: 1, B: 2 });
      const misses = await valuesOf(registry, 'herdcache_misses_total');
      expect(misses.map(({ labels, value }) => [labels.operation, labels.source, value]).sort()).toEqual([
        ['A', 'Query.hot', 1],
        ['B', 'User.score', 1],
        ['B', 'user', 1],
      ]);
      // Fill durations: one observation per key filled, by source.
      const histogram = await valuesOf(registry, FILL_DURATION_METRIC);
      const counts = Object.fromEntries(
        histogram
          .filter((v) => v.metricName === `${FILL_DURATION_METRIC}_count`)
          .map((v) => [v.labels.source, v.value]),
      );
      expect(counts).toEqual({ 'Query.hot': 1, user: 1, 'User.score': 1 });
    } finally {
      await server.stop();
    }
  });

  it('counts bypasses and fill failures', async () => {
    const registry = new Registry();
    const { server } = fixture({ registry, extensions: false });
    await server.start();
    try {
      await server.executeOperation({ query: 'query Anon { me(n: 1) { n } fail(code: "X") }' }, { contextValue: {} });
      expect(await valuesOf(registry, 'herdcache_bypassed_total')).toMatchObject([
        { labels: { operation: 'Anon', source: 'Query.me' }, value: 1 },
      ]);
      expect(await valuesOf(registry, 'herdcache_fill_failures_total')).toMatchObject([
        { labels: { operation: 'Anon', source: 'Query.fail' }, value: 1 },
      ]);
    } finally {
      await server.stop();
    }
  });

  it('two servers on one registry and one cache share the metrics and observe each fill once; stop() stops observing', async () => {
    const registry = new Registry();
    const cache = createCache();
    const first = fixture({ cache, registry });
    await first.server.start();
    // A second server on the same cache: its loader needs another name, so build it by hand.
    const metrics = await prometheusMetrics({ registry });
    expect(await prometheusMetrics({ registry })).toBe(metrics);
    const stopExtra = metrics.observe(cache);
    await cache.getOrCompute('k1', () => 1, { label: 'L' });
    const count = async () =>
      (await valuesOf(registry, FILL_DURATION_METRIC)).find(
        (v) => v.metricName === `${FILL_DURATION_METRIC}_count` && v.labels.source === 'L',
      )?.value ?? 0;
    expect(await count()).toBe(1);
    stopExtra();
    await cache.getOrCompute('k2', () => 2, { label: 'L' });
    expect(await count()).toBe(2); // the server still observes
    await first.server.stop();
    await cache.getOrCompute('k3', () => 3, { label: 'L' });
    expect(await count()).toBe(2); // nobody observes now
  });

  it('metric names match the documented table', () => {
    expect(Object.values(COUNTER_METRICS).map(([name]) => name)).toEqual([
      'herdcache_hits_total',
      'herdcache_misses_total',
      'herdcache_coalesced_total',
      'herdcache_stale_served_total',
      'herdcache_fills_total',
      'herdcache_fill_failures_total',
      'herdcache_lock_contended_total',
      'herdcache_bypassed_total',
    ]);
  });

  it('operationLabel: first N names kept, then "other"; empty or missing → "anonymous"', async () => {
    const metrics = await prometheusMetrics({ registry: new Registry(), maxOperationLabels: 3 });
    expect(
      ['a', 'b', 'a', 'c', 'd', 'e', 'b', null, undefined, ''].map((name) => metrics.operationLabel(name)),
    ).toEqual(['a', 'b', 'a', 'c', 'other', 'other', 'b', 'anonymous', 'anonymous', 'anonymous']);
  });

  it('validates its options', async () => {
    await expect(prometheusMetrics({ registry: {} as never })).rejects.toThrow(/option "registry"/);
    await expect(prometheusMetrics({ registry: new Registry(), maxOperationLabels: 1.5 })).rejects.toThrow(
      /option "maxOperationLabels"/,
    );
  });

  it("a registry already holding a metric of herdcache's name with other labels: refused at start, naming it, never a failed request", async () => {
    const { Counter } = await import('prom-client');
    const registry = new Registry();
    new Counter({ name: 'herdcache_hits_total', help: 'mine', labelNames: ['route'], registers: [registry] });
    const { server } = fixture({ registry });
    await expect(server.start()).rejects.toThrow(/"herdcache_hits_total".*labels: route/);
  });

  it('a recorder that throws (a metric changed under it) fails no operation: warned once', async () => {
    const registry = new Registry();
    const { server, context } = fixture({ registry, extensions: false });
    await server.start();
    const warnings: string[] = [];
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation(((
      _warning: string,
      options?: { code?: string },
    ) => {
      warnings.push(String(options?.code));
    }) as typeof process.emitWarning);
    const hits = registry.getSingleMetric('herdcache_hits_total') as unknown as { inc: () => void };
    const inc = hits.inc;
    hits.inc = () => {
      throw new Error('broken metric');
    };
    try {
      for (let i = 0; i < 3; i++) {
        const response = await server.executeOperation({ query: '{ hot { value } }' }, { contextValue: context() });
        expect((response.body as { singleResult: { errors?: unknown } }).singleResult.errors).toBeUndefined();
      }
      expect(warnings.filter((code) => code === 'HERDCACHE_METRICS_FAILED')).toHaveLength(1);
    } finally {
      hits.inc = inc;
      spy.mockRestore();
      await server.stop();
    }
  });
});

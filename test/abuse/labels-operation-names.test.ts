/**
 * Hostile operation names: the `operation` label is a client's string. However long the names and
 * whatever they spell, /metrics stays small and the "other" / "anonymous" buckets keep their meaning.
 */
import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import { MAX_OPERATION_LABEL_LENGTH, operationLabelOf, prometheusMetrics } from '../../src/prometheus/metrics';
import { fixture } from '../apollo/fixtures';

const sha8 = (name: string) => createHash('sha1').update(name, 'utf8').digest('hex').slice(0, 8);

/** Every `operation="…"` pair of a /metrics text, summed in bytes. */
function operationLabelBytes(text: string): number {
  let bytes = 0;
  for (const match of text.matchAll(/operation="(?:[^"\\]|\\.)*"/g)) bytes += Buffer.byteLength(match[0]);
  return bytes;
}

describe('operation labels: length-capped, buckets reserved', () => {
  it('keeps a GraphQL name of up to 64 characters as it is', () => {
    const name = `Q${'x'.repeat(MAX_OPERATION_LABEL_LENGTH - 1)}`;
    expect(operationLabelOf(name)).toBe(name);
    expect(operationLabelOf('GetUser_2')).toBe('GetUser_2');
  });

  it('cuts a longer name to 64 characters, then "~" and 8 hex of its sha1: two long names with one head differ', () => {
    const a = `Q${'x'.repeat(100 * 1024)}a`;
    const b = `Q${'x'.repeat(100 * 1024)}b`;
    expect(operationLabelOf(a)).toBe(`${a.slice(0, 64)}~${sha8(a)}`);
    expect(operationLabelOf(a)).toHaveLength(73);
    expect(operationLabelOf(a)).not.toBe(operationLabelOf(b));
  });

  it('a client naming its operation "other" or "anonymous" gets a label of its own, not the bucket', () => {
    expect(operationLabelOf('other')).toBe(`other~${sha8('other')}`);
    expect(operationLabelOf('anonymous')).toBe(`anonymous~${sha8('anonymous')}`);
    expect(operationLabelOf(null)).toBe('anonymous');
    expect(operationLabelOf('')).toBe('anonymous');
  });

  it('a name that is not a GraphQL name (a requested operationName Envelop passes on) is hashed: nobody spells a hashed label', () => {
    const spelt = operationLabelOf('other'); // "other~xxxxxxxx", as another client could type it
    expect(operationLabelOf(spelt)).not.toBe(spelt);
    expect(operationLabelOf(spelt)).toMatch(/^other_[0-9a-f]{8}~[0-9a-f]{8}$/);
    expect(operationLabelOf('a"b\nc')).toMatch(/^a_b_c~[0-9a-f]{8}$/);
  });

  it('the cap on distinct labels counts labels, and a client "other" takes a place as any name does', async () => {
    const metrics = await prometheusMetrics({ registry: new Registry(), maxOperationLabels: 2 });
    expect(['other', 'A', 'B', 'anonymous', undefined].map((name) => metrics.operationLabel(name))).toEqual([
      `other~${sha8('other')}`,
      'A',
      'other',
      'other',
      'anonymous',
    ]);
  });

  it('150 operations named with 100 KiB each, through Apollo Server: /metrics stays under 64 KiB of operation labels', async () => {
    const registry = new Registry();
    const { server, context } = fixture({ registry, extensions: false });
    await server.start();
    try {
      for (let i = 0; i < 150; i++) {
        const name = `Q${String(i).padStart(3, '0')}${'x'.repeat(100 * 1024)}`;
        const response = await server.executeOperation(
          { query: `query ${name} { hot { value } }` },
          { contextValue: context() },
        );
        expect(response.body.kind === 'single' && response.body.singleResult.errors).toBeUndefined();
      }
      // And the two buckets, spelt by clients.
      await server.executeOperation({ query: 'query other { hot { value } }' }, { contextValue: context() });
      await server.executeOperation({ query: 'query anonymous { hot { value } }' }, { contextValue: context() });
      const text = await registry.metrics();
      const labelBytes = operationLabelBytes(text);
      // 100 kept labels (the default cap) of at most 73 characters, "other", in a few counters.
      expect(labelBytes).toBeGreaterThan(0);
      expect(labelBytes).toBeLessThan(64 * 1024);
      expect(Buffer.byteLength(text)).toBeLessThan(128 * 1024);
      // The first operation missed (and filled), every later one hit.
      const misses = (await registry.getSingleMetric('herdcache_misses_total')!.get()).values;
      const hits = (await registry.getSingleMetric('herdcache_hits_total')!.get()).values;
      expect(misses.map((v) => [v.labels.operation, v.value])).toEqual([
        [operationLabelOf(`Q000${'x'.repeat(100 * 1024)}`), 1],
      ]);
      const operations = new Set([...misses, ...hits].map((v) => String(v.labels.operation)));
      expect(operations.size).toBe(101); // 100 kept + "other"
      for (const operation of operations) expect(operation.length).toBeLessThanOrEqual(73);
      // The clients' "other" and "anonymous" went to the bucket "other" (the cap was reached), never "anonymous".
      expect(operations.has('anonymous')).toBe(false);
      const other = hits.filter((v) => v.labels.operation === 'other').reduce((n, v) => n + v.value, 0);
      expect(other).toBe(52);
    } finally {
      await server.stop();
    }
  });
});

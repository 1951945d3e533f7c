/**
 * useHerdcache on a real GraphQL Yoga 5 server over HTTP (127.0.0.1, a free port): the same
 * per-operation report and the same Prometheus metrics as the Apollo plugin, /metrics included.
 */
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createYoga } from 'graphql-yoga';
import { Registry } from 'prom-client';
import { useHerdcache } from '../../src/envelop';
import { deferred } from '../helpers';
import { fixture, reportOf, single, zeros } from '../apollo/fixtures';

type Fixture = ReturnType<typeof fixture>;

interface YogaOptions {
  extensions?: boolean;
  registry?: Registry;
  /** Build the context with herdcacheContext() (else the plugin attaches the operation's state). */
  appContext?: boolean;
}

/** A Yoga server on the fixture's schema and cache, with /metrics beside /graphql. */
async function listen(
  f: Fixture,
  options: YogaOptions = {},
): Promise<{ graphql: string; metrics: string; close(): Promise<void> }> {
  const { registry, appContext = true } = options;
  const yoga = createYoga({
    schema: f.schema,
    plugins: [useHerdcache({ cache: f.cache, extensions: options.extensions, registry })],
    context: ({ request }) => {
      const session = request.headers.get('x-session') ?? undefined;
      // Without herdcacheContext(): the registry loaders themselves, no request scope but the plugin's.
      return appContext ? f.context(session) : { session, loaders: f.loaders };
    },
    logging: false,
    maskedErrors: false,
  });
  const server: Server = createServer((req, res) => {
    if (req.url === '/metrics' && registry !== undefined) {
      void registry.metrics().then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text));
      return;
    }
    void yoga(req, res);
  });
  // Longer than the client's keep-alive (undici: 4 s), so the client always drops an idle socket
  // first: the server closing it as a request leaves would reset that request (ECONNRESET).
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    graphql: `${base}/graphql`,
    metrics: `${base}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function post(
  url: string,
  query: string,
  session?: string,
): Promise<{ data?: any; errors?: unknown[]; extensions?: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (session !== undefined) headers['x-session'] = session;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ query }) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`HTTP ${response.status} for ${query}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as { data?: any };
}

/** The herdcache_* samples of a /metrics text, without HELP/TYPE lines. */
function herdcacheSamples(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('herdcache_') && !line.startsWith('herdcache_fill_duration_seconds'))
    .sort();
}

describe('useHerdcache on GraphQL Yoga over HTTP', () => {
  it('300 concurrent identical queries: the @cached resolver runs once; every response reports its one load', async () => {
    const N = 300;
    const allRegistered = deferred<void>();
    let pings = 0;
    const f = fixture({
      hotGate: () => allRegistered.promise,
      onPing: () => {
        if (++pings === N) allRegistered.resolve();
      },
    });
    const server = await listen(f, { extensions: true });
    try {
      const responses = await Promise.all(
        Array.from({ length: N }, () => post(server.graphql, 'query Hot { hot { value } ping }')),
      );
      expect(f.counter.calls.hot).toBe(1);
      const total = zeros();
      for (const response of responses) {
        expect(response.errors).toBeUndefined();
        expect(response.data).toEqual({ hot: { value: 42 }, ping: 1 });
        const report = reportOf(response);
        expect(Object.keys(report.sources)).toEqual(['Query.hot']);
        expect(report.total).toEqual(report.sources['Query.hot']);
        for (const key of Object.keys(total) as (keyof typeof total)[]) total[key] += report.total[key];
      }
      expect(total).toEqual({ ...zeros(), misses: 1, coalesced: N - 1, fills: 1 });
    } finally {
      await server.close();
    }
  });

  it('reports and counts exactly as the Apollo plugin does, with or without herdcacheContext(); /metrics serves them', async () => {
    const queries: [string, string | undefined][] = [
      ['query Home { hot { value } user(id: "2") { name score } }', undefined],
      ['query Home { hot { value } user(id: "2") { name score } }', undefined],
      ['query Users { users(ids: ["2", "3", "4"]) { score } }', undefined],
      ['query Mine { me(n: 1) { owner n } }', 'alice'],
      ['query Mine { me(n: 1) { owner n } }', undefined],
      ['{ fail(code: "X") }', undefined],
    ];
    for (const appContext of [true, false]) {
      const apolloRegistry = new Registry();
      const apollo = fixture({ registry: apolloRegistry, extensions: true });
      await apollo.server.start();
      const yogaRegistry = new Registry();
      const yogaFixture = fixture();
      const yoga = await listen(yogaFixture, { extensions: true, registry: yogaRegistry, appContext });
      try {
        for (const [query, session] of queries) {
          const fromApollo = single(
            await apollo.server.executeOperation(
              { query },
              {
                contextValue: (appContext ? apollo.context(session) : { session, loaders: apollo.loaders }) as {
                  session?: string;
                },
              },
            ),
          );
          const fromYoga = await post(yoga.graphql, query, session);
          expect(fromYoga.errors ?? null).toEqual(fromApollo.errors ?? null);
          expect({ query, appContext, report: reportOf(fromYoga) }).toEqual({
            query,
            appContext,
            report: reportOf(fromApollo),
          });
          expect(fromYoga.data).toEqual(fromApollo.data);
        }
        const scraped = await (await fetch(yoga.metrics)).text();
        const samples = herdcacheSamples(scraped);
        expect(samples).toContain('herdcache_misses_total{operation="Home",source="Query.hot"} 1');
        expect(samples).toContain('herdcache_hits_total{operation="Home",source="Query.hot"} 1');
        expect(samples).toContain('herdcache_bypassed_total{operation="Mine",source="Query.me"} 1');
        expect(samples).toContain('herdcache_fill_failures_total{operation="anonymous",source="Query.fail"} 1');
        expect(samples).toEqual(herdcacheSamples(await apolloRegistry.metrics()));
        expect(scraped).toContain('herdcache_fill_duration_seconds_count{source="Query.hot"} 1');
      } finally {
        await yoga.close();
        await apollo.server.stop();
      }
    }
  });

  it('no extension in production by default; metrics still counted', async () => {
    const before = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      const registry = new Registry();
      const f = fixture();
      const server = await listen(f, { registry });
      try {
        const response = await post(server.graphql, 'query P { hot { value } }');
        expect(response.data).toEqual({ hot: { value: 42 } });
        expect(response.extensions?.cache).toBeUndefined();
        expect(herdcacheSamples(await (await fetch(server.metrics)).text())).toContain(
          'herdcache_misses_total{operation="P",source="Query.hot"} 1',
        );
      } finally {
        await server.close();
      }
    } finally {
      process.env.NODE_ENV = before;
    }
  });

  it('validates its options, naming them', () => {
    const { cache } = fixture();
    expect(() => useHerdcache(null as never)).toThrow(/option "options"/);
    expect(() => useHerdcache({ cache: {} as never })).toThrow(/option "cache"/);
    expect(() => useHerdcache({ cache, extensions: 'yes' as never })).toThrow(/option "extensions"/);
    expect(() => useHerdcache({ cache, registry: {} as never })).toThrow(/option "registry"/);
    expect(() => useHerdcache({ cache, maxOperationLabels: 0 })).toThrow(/option "maxOperationLabels"/);
  });
});

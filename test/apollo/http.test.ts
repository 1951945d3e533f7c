/** Over real HTTP (startStandaloneServer on 127.0.0.1, a free port): the stampede, and PRIVATE isolation. */
import { startStandaloneServer } from '@apollo/server/standalone';
import { deferred } from '../helpers';
import { fixture, reportOf, zeros } from './fixtures';

type Fixture = ReturnType<typeof fixture>;

async function listen(f: Fixture): Promise<string> {
  const { url } = await startStandaloneServer(f.server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) =>
      f.context(typeof req.headers['x-session'] === 'string' ? req.headers['x-session'] : undefined),
  });
  return url;
}

async function post(
  url: string,
  query: string,
  session?: string,
): Promise<{ data?: any; errors?: unknown[]; extensions?: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (session !== undefined) headers['x-session'] = session;
  const init = { method: 'POST', headers, body: JSON.stringify({ query }) };
  // A reused keep-alive socket that the server closed as idle just as this request left (a race
  // a loaded machine makes likely) resets before the server read anything: send it again, once.
  const response = await fetch(url, init).catch((error: { cause?: { code?: string } }) => {
    if (error.cause?.code === 'ECONNRESET') return fetch(url, init);
    throw error;
  });
  const text = await response.text();
  // Thrown with the body, so a failure under load says what the server answered.
  if (response.status !== 200)
    throw new Error(`HTTP ${response.status} for ${query} (session ${session}): ${text.slice(0, 500)}`);
  return JSON.parse(text) as { data?: any };
}

describe('over HTTP', () => {
  it('500 concurrent identical queries: the @cached resolver runs once; the extension counts add up', async () => {
    const N = 500;
    const allRegistered = deferred<void>();
    let pings = 0;
    const f = fixture({
      extensions: true,
      // `hot` returns only once every request has asked for it: nobody can be answered by a
      // finished fill, so each of the others must join the one in flight.
      hotGate: () => allRegistered.promise,
      onPing: () => {
        if (++pings === N) allRegistered.resolve();
      },
    });
    const url = await listen(f);
    try {
      const responses = await Promise.all(Array.from({ length: N }, () => post(url, '{ hot { value } ping }')));
      expect(f.counter.calls.hot).toBe(1);
      expect(pings).toBe(N);
      const total = zeros();
      for (const response of responses) {
        expect(response.errors).toBeUndefined();
        expect(response.data).toEqual({ hot: { value: 42 }, ping: 1 });
        const report = reportOf(response);
        expect(Object.keys(report.sources)).toEqual(['Query.hot']);
        const row = report.sources['Query.hot']!;
        // One load per response, whatever its outcome; totals equal the sum of sources.
        expect(row.hits + row.misses + row.coalesced + row.staleServed).toBe(1);
        expect(report.total).toEqual(row);
        for (const key of Object.keys(total) as (keyof typeof total)[]) total[key] += row[key];
      }
      expect(total).toEqual({ ...zeros(), misses: 1, coalesced: N - 1, fills: 1 });
      // The registry saw the same.
      expect(f.cache.metrics().sources['Query.hot']).toMatchObject({ misses: 1, coalesced: N - 1, fills: 1, hits: 0 });
    } finally {
      await f.server.stop();
    }
  });

  it('randomized two-user run: PRIVATE data is never served across sessions', async () => {
    const seed = Number(process.env.HERDCACHE_TEST_SEED ?? Date.now() % 100_000);
    let state = seed;
    const rand = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state / 2 ** 31;
    };
    const f = fixture({ extensions: true });
    const url = await listen(f);
    const sessions = ['alice', 'bob', undefined];
    const distinct = new Set<string>();
    let anonymous = 0;
    try {
      for (let round = 0; round < 8; round++) {
        // A burst of concurrent requests from both users (and some without a session), same fields, mixed arguments.
        const burst = Array.from({ length: 40 }, () => ({
          session: sessions[Math.floor(rand() * 3)],
          n: Math.floor(rand() * 4),
        }));
        const responses = await Promise.all(
          burst.map(({ session, n }) => post(url, `{ me(n: ${n}) { owner n } hot { value } }`, session)),
        );
        burst.forEach(({ session, n }, i) => {
          const response = responses[i]!;
          expect({ seed, request: { session, n }, got: response.data?.me }).toEqual({
            seed,
            request: { session, n },
            got: { owner: session ?? null, n },
          });
          const row = reportOf(response).sources['Query.me']!;
          if (session === undefined) {
            anonymous++;
            expect(row).toEqual({ ...zeros(), bypassed: 1 });
          } else {
            distinct.add(`${session}:${n}`);
            expect(row.bypassed).toBe(0);
          }
        });
      }
      // Cached per (session, n): the resolver ran once per distinct pair, and once per anonymous request.
      const calls = Object.entries(f.counter.calls).filter(([label]) => label.startsWith('me:'));
      const sessionCalls = calls.filter(([label]) => !label.startsWith('me::'));
      expect({ seed, calls: Object.fromEntries(sessionCalls) }).toEqual({
        seed,
        calls: Object.fromEntries([...distinct].map((pair) => [`me:${pair}`, 1])),
      });
      expect(calls.filter(([label]) => label.startsWith('me::')).reduce((n, [, c]) => n + c, 0)).toBe(anonymous);
      expect(f.counter.calls.hot).toBe(1);
    } finally {
      await f.server.stop();
    }
  });
});

/**
 * The response layer's targets, counted (never timed), over HTTP on the real servers: two replicas
 * (Apollo 5 and Yoga 5) on one real Redis, PRIVATE under seeded random load, read-after-write on
 * two replicas, SWR expiry under load with an injected clock, oversized responses (one execution
 * shared by the requests waiting on it, in the process and per replica).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { createYoga } from 'graphql-yoga';
import type Redis from 'ioredis';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core';
import { manualClock } from '../../src/core/freshness';
import { useHerdcache } from '../../src/envelop/plugin';
import type { ResponseCacheOptions } from '../../src/graphql/response-cache';
import { redisStore } from '../../src/redis';
import { post, responseFixture, until, type ResponseFixture } from '../graphql/response-fixture';
import { connect, randomPrefix } from '../redis/helpers';

type Server = 'apollo' | 'yoga';
type Context = { session?: string };
const bySession: ResponseCacheOptions<Context> = { sessionId: (ctx) => ctx.session };

async function serve(
  kind: Server,
  f: ResponseFixture,
  responseCache: true | ResponseCacheOptions<Context> = bySession,
  registry?: import('prom-client').Registry,
) {
  if (kind === 'apollo') {
    const server = new ApolloServer<Context>({
      schema: f.schema,
      plugins: [herdcachePlugin<Context>({ cache: f.cache, extensions: true, responseCache, registry })],
    });
    const { url } = await startStandaloneServer(server, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req }) =>
        typeof req.headers['x-session'] === 'string' ? { session: req.headers['x-session'] } : {},
    });
    return { url, stop: () => server.stop() };
  }
  const yoga = createYoga<Context>({
    schema: f.schema,
    plugins: [useHerdcache<Context>({ cache: f.cache, extensions: true, responseCache, registry })],
    context: ({ request }) => {
      const session = request.headers.get('x-session');
      return session === null ? {} : { session };
    },
    logging: false,
    maskedErrors: false,
  });
  const server = createServer((req, res) => void yoga(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Response lookups that joined an execution in flight (counted when they join). */
function joined(f: ResponseFixture): number {
  return f.cache.metrics().sources.response?.coalesced ?? 0;
}

/** A small seeded generator (mulberry32): the same requests on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const clients: Redis[] = [];
async function client(): Promise<Redis> {
  const c = await connect();
  clients.push(c);
  return c;
}
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit()));
});

/** Two replicas (their own cache and server) on one Redis prefix. */
async function twoReplicas(kinds: [Server, Server]) {
  const prefix = randomPrefix('resp2');
  const a = responseFixture({ store: redisStore({ client: await client(), prefix }) });
  // One database: a write on either replica is what both read.
  const b = responseFixture({ store: redisStore({ client: await client(), prefix }), names: a.names });
  const sa = await serve(kinds[0], a);
  const sb = await serve(kinds[1], b);
  return { a, b, sa, sb, stop: () => Promise.all([sa.stop(), sb.stop()]) };
}

describe('two replicas on one Redis', () => {
  it.each([
    ['apollo', 'apollo'],
    ['apollo', 'yoga'],
  ] as [Server, Server][])(
    '%s + %s: 200 concurrent cold identical requests, 100 to each, execute once',
    async (...kinds) => {
      const r = await twoReplicas(kinds);
      try {
        const N = 100;
        const pending = Array.from({ length: 2 * N }, (_, i) => post(i % 2 === 0 ? r.sa.url : r.sb.url, '{ slow }'));
        await until(() => (r.a.calls.slow ?? 0) + (r.b.calls.slow ?? 0) === 1, 'the first execution');
        // Every request reaches its replica's cache while the one execution runs.
        await new Promise((resolve) => setTimeout(resolve, 100));
        r.a.gate.open();
        r.b.gate.open();
        const responses = await Promise.all(pending);
        for (const response of responses) expect(response.body.data).toEqual({ slow: 7 });
        expect((r.a.calls.slow ?? 0) + (r.b.calls.slow ?? 0)).toBe(1);
        const outcomes = responses.map((response) => response.body.extensions?.cache?.response);
        expect(outcomes.filter((o) => o === 'miss')).toHaveLength(1);
        expect(outcomes.filter((o) => o === 'coalesced' || o === 'hit')).toHaveLength(2 * N - 1);
      } finally {
        await r.stop();
      }
    },
    120_000,
  );

  it.each([
    ['apollo', 'apollo'],
    ['yoga', 'apollo'],
  ] as [Server, Server][])(
    '%s + %s: read-after-write through @invalidates and a mutation result entity, every read fresh on both',
    async (...kinds) => {
      const r = await twoReplicas(kinds);
      try {
        const urls = [r.sa.url, r.sb.url];
        const query = '{ user(id: "1") { id name } }';
        let expected = 'Ada';
        let reads = 0;
        let fresh = 0;
        let hits = 0;
        const readBoth = async () => {
          for (const url of urls) {
            for (let i = 0; i < 2; i++) {
              const body = (await post(url, query)).body;
              reads++;
              if (body.data.user.name === expected) fresh++;
              if (body.extensions?.cache?.response === 'hit') hits++;
            }
          }
        };
        await readBoth();
        for (let round = 0; round < 10; round++) {
          const url = urls[round % 2]!; // the write lands on either replica
          expected = `Ada${round}`;
          const mutation = round % 4 < 2 ? 'renameUser' : 'renameUserEntity'; // @invalidates, then the result entity alone
          const written = await post(url, `mutation { ${mutation}(id: "1", name: "${expected}") { id name } }`);
          expect(written.body.data[mutation].name).toBe(expected);
          await readBoth();
        }
        expect(fresh).toBe(reads);
        // The reads were cached between writes (each replica read twice per round: the second a hit).
        expect(hits).toBeGreaterThanOrEqual(11);
      } finally {
        await r.stop();
      }
    },
    120_000,
  );
});

describe.each([
  ['apollo', 'memory'],
  ['yoga', 'redis'],
] as [Server, string][])('PRIVATE under seeded random load (%s, %s store)', (kind, storeName) => {
  it('0 leaks in 2,000 requests over 8 sessions, concurrent joiners included', async () => {
    const store =
      storeName === 'redis' ? redisStore({ client: await client(), prefix: randomPrefix('private') }) : undefined;
    const f = responseFixture({ store });
    const { url, stop } = await serve(kind, f);
    // Declared PUBLIC, made PRIVATE at run time: by setResponseCacheHint (both servers), and on Apollo by
    // info.cacheControl.setCacheHint too (Yoga has none: there viewerDynamic would be the schema's own lie).
    const queries = ['{ me { id name } }', '{ me { name } products { id } }', '{ products { id name } }'];
    queries.push('{ viewerHinted }', '{ viewerHinted products { id } }');
    if (kind === 'apollo') queries.push('{ viewerDynamic }', '{ viewerDynamic products { id } }');
    const sessions = ['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7'];
    const random = seeded(18);
    let sent = 0;
    let leaks = 0;
    const outcomes: Record<string, number> = {};
    try {
      while (sent < 2000) {
        // A burst of concurrent requests: often the same query from several sessions (joiners).
        const size = Math.min(2000 - sent, 1 + Math.floor(random() * 24));
        const query = queries[Math.floor(random() * queries.length)]!;
        const burst = Array.from({ length: size }, () => {
          const session = random() < 0.05 ? undefined : sessions[Math.floor(random() * sessions.length)];
          const other = random() < 0.2 ? queries[Math.floor(random() * queries.length)]! : query;
          return { session, query: other };
        });
        sent += size;
        // Now and then everything expires: the next bursts find the keys cold and join executions.
        if (random() < 0.1) await f.cache.clear();
        const responses = await Promise.all(
          burst.map((b) => post(url, b.query, b.session === undefined ? {} : { session: b.session })),
        );
        responses.forEach((response, i) => {
          const text = JSON.stringify(response.body.data);
          const seen = [...text.matchAll(/viewer (\w+)/g)].map((m) => m[1]);
          const own = String(burst[i]!.session);
          if (response.body.errors !== undefined || seen.some((viewer) => viewer !== own)) leaks++;
          const outcome = response.body.extensions?.cache?.response ?? 'none';
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        });
      }
      expect(leaks).toBe(0);
      // The load did exercise the cache: stored answers and shared executions, not only bypasses.
      expect(outcomes.hit ?? 0).toBeGreaterThan(100);
      expect(outcomes.coalesced ?? 0).toBeGreaterThan(0);
      expect(Object.values(outcomes).reduce((x, y) => x + y, 0)).toBe(2000);
    } finally {
      await stop();
    }
  }, 300_000); // 2,000 requests over HTTP: minutes on a loaded machine (nothing here is timed)
});

describe.each(['apollo', 'yoga'] as Server[])('%s: expiry under load with swr', (kind) => {
  it('no request waits for a refresh, and each expiry is refreshed by one execution', async () => {
    const clock = manualClock();
    const f = responseFixture({ cache: createCache({ clock }) });
    const { url, stop } = await serve(kind, f, { swr: 60 });
    try {
      expect((await post(url, '{ fresh }')).body.data).toEqual({ fresh: 1 });
      const expiries = 5;
      let waited = 0;
      for (let expiry = 1; expiry <= expiries; expiry++) {
        clock.advance(31_000); // past maxAge 30, within swr 60
        const responses = await Promise.all(Array.from({ length: 40 }, () => post(url, '{ fresh }')));
        for (const response of responses) {
          // Served from the cache (the stale value, or the refreshed one once it landed), never an execution awaited.
          if (
            response.body.extensions?.cache?.response !== 'stale' &&
            response.body.extensions?.cache?.response !== 'hit'
          )
            waited++;
          expect([expiry, expiry + 1]).toContain(response.body.data.fresh);
        }
        expect(responses.some((response) => response.body.extensions?.cache?.response === 'stale')).toBe(true);
        await until(() => f.calls.fresh === expiry + 1, 'the refresh');
      }
      expect(waited).toBe(0);
      expect(f.calls.fresh).toBe(1 + expiries);
    } finally {
      await stop();
    }
  });
});

describe.each(['apollo', 'yoga'] as Server[])('%s: a response refreshed while its @cached field is stale', (kind) => {
  /** A server on a fixture whose cache reads an injected clock; stopped after `body`. */
  const withClock = async (
    body: (f: ResponseFixture, url: string, clock: ReturnType<typeof manualClock>) => Promise<void>,
  ) => {
    const clock = manualClock();
    const f = responseFixture({ cache: createCache({ clock }) });
    const { url, stop } = await serve(kind, f);
    try {
      await body(f, url, clock);
    } finally {
      await stop();
    }
  };

  it('is stored fresh for a second only (max-age=1), not its maxAge; then the refreshed field is read', async () => {
    await withClock(async (f, url, clock) => {
      const read = async () => {
        const response = await post(url, '{ swrTick }');
        return [response.body.data.swrTick, response.body.extensions?.cache?.response];
      };
      expect(await read()).toEqual([1, 'miss']);
      expect(await read()).toEqual([1, 'hit']);
      clock.advance(11_000); // the response and its field past maxAge/ttl (10 s), within swr (60 s)
      // Served stale; its refresh runs apart, reads the field stale (which starts the field's refresh).
      expect(await read()).toEqual([1, 'stale']);
      await until(() => f.calls.swrTick === 2 && f.cache.inFlight === 0, 'the refreshes');
      // That refresh held the field's stale value: stored for a second only, and said so over HTTP.
      const brief = await post(url, '{ swrTick }');
      expect([brief.body.data.swrTick, brief.body.extensions?.cache?.response]).toEqual([1, 'hit']);
      expect(brief.headers.get('cache-control')).toBe('max-age=1, public');
      clock.advance(1_001); // (with its maxAge, 10 s, it would still be a fresh hit with 1)
      expect(await read()).toEqual([1, 'stale']); // its next refresh reads the refreshed field
      await until(() => f.cache.inFlight === 0, 'the second refresh');
      expect(await read()).toEqual([2, 'hit']);
      clock.advance(5_000); // stored for its maxAge now
      expect(await read()).toEqual([2, 'hit']);
      expect(f.calls.swrTick).toBe(2);
    });
  });

  it('a miss that reads a stale field says so, and is stored for a second only', async () => {
    await withClock(async (f, url, clock) => {
      await post(url, '{ swrTick }'); // the field cached at 0
      clock.advance(11_000);
      const query = '{ swrTick products { id } }'; // a new operation: a miss
      const response = await post(url, query);
      expect(response.body.data.swrTick).toBe(1);
      expect(response.body.extensions?.cache).toMatchObject({ response: 'miss', notStoredReason: 'stale_fields' });
      await until(() => f.cache.inFlight === 0, 'the field refresh');
      expect((await post(url, query)).body.extensions?.cache?.response).toBe('hit'); // within its second
      clock.advance(1_001);
      const stale = await post(url, query);
      expect([stale.body.data.swrTick, stale.body.extensions?.cache?.response]).toEqual([1, 'stale']);
      await until(() => f.cache.inFlight === 0, 'the response refresh');
      const again = await post(url, query);
      expect([again.body.data.swrTick, again.body.extensions?.cache?.response]).toEqual([2, 'hit']);
    });
  });

  it('while the field cannot be refreshed (its backend down), executions stay at one a second at most', async () => {
    await withClock(async (f, url, clock) => {
      await post(url, '{ swrTickDown executions }');
      f.down.on = true;
      clock.advance(11_000);
      const executionsBefore = f.calls.executions!;
      // 5 simulated seconds, 20 requests each, with the field stale and its refresh failing.
      for (let second = 0; second < 5; second++) {
        for (let i = 0; i < 20; i++) {
          const response = await post(url, '{ swrTickDown executions }');
          expect(response.body.data.swrTickDown).toBe(1); // the stale value, never an error
          await until(() => f.cache.inFlight === 0, 'the refreshes');
        }
        clock.advance(1_000);
      }
      // One execution per simulated second at most (plus the first), not one per request (100).
      expect(f.calls.executions! - executionsBefore).toBeLessThanOrEqual(6);
      expect(f.calls.executions! - executionsBefore).toBeGreaterThanOrEqual(5); // refreshed each second
    });
  });
});

describe.each(['apollo', 'yoga'] as Server[])('%s: an oversized response', (kind) => {
  it('is served, not stored, and counted', async () => {
    const { Registry } = await import('prom-client');
    const registry = new Registry();
    const f = responseFixture();
    const { url, stop } = await serve(kind, f, { maxBytes: 1000 }, registry);
    try {
      const big = 'query Big($size: Int!) { big(size: $size) }';
      for (let i = 0; i < 3; i++) {
        const response = await post(url, big, { variables: { size: 2000 } });
        expect(response.body.data.big).toHaveLength(2000);
        expect(response.body.extensions?.cache?.response).toBe('oversized');
      }
      expect(f.calls.big).toBe(3);
      // A small one under the same document is stored.
      await post(url, big, { variables: { size: 10 } });
      expect((await post(url, big, { variables: { size: 10 } })).body.extensions?.cache?.response).toBe('hit');
      expect(f.calls.big).toBe(4);
      const text = await registry.metrics();
      expect(text).toContain('herdcache_responses_total{operation="Big",outcome="oversized"} 3');
      expect(text).toContain('herdcache_responses_total{operation="Big",outcome="hit"} 1');
    } finally {
      await stop();
    }
  });
});

/**
 * A response under maxBytes that the store itself would skip (over a memory store's maxEntrySize, a
 * Redis store's maxValueBytes): before, it was reported a plain miss (stored, to the reader), never
 * written, and executed again by every request. Now it is reported and counted as oversized, and
 * still shared with the requests waiting on it.
 */
describe.each([
  ['apollo', 'memory'],
  ['yoga', 'memory'],
  ['apollo', 'redis'],
  ['yoga', 'redis'],
] as [Server, 'memory' | 'redis'][])('%s on a %s store: a response larger than the store keeps', (kind, storeKind) => {
  it('is served, reported and counted as oversized, and shared with its waiters', async () => {
    const { Registry } = await import('prom-client');
    const registry = new Registry();
    const client = storeKind === 'redis' ? await connect() : undefined;
    const store =
      client === undefined
        ? memoryStore({ maxEntrySize: 4096 })
        : redisStore({ client, prefix: randomPrefix('store-limit'), maxValueBytes: 4096 });
    const f = responseFixture({ store });
    const { url, stop } = await serve(kind, f, { maxBytes: 1024 * 1024 }, registry);
    try {
      const big = 'query Big($size: Int!) { big(size: $size) }';
      for (let i = 0; i < 2; i++) {
        const response = await post(url, big, { variables: { size: 10_000 } });
        expect(response.body.data.big).toHaveLength(10_000);
        expect(response.body.extensions?.cache?.response).toBe('oversized');
      }
      expect(f.calls.big).toBe(2);
      expect(await registry.metrics()).toContain('herdcache_responses_total{operation="Big",outcome="oversized"} 2');
      // Concurrent identical requests share one execution still.
      const query = '{ slowBig(size: 10000) }';
      const pending = Array.from({ length: 8 }, () => post(url, query));
      await until(() => f.calls.slowBig === 1, 'the execution');
      await until(() => joined(f) === 7, 'every request joined the execution');
      f.gate.open();
      const responses = await Promise.all(pending);
      for (const response of responses) expect(response.body.data.slowBig).toHaveLength(10_000);
      const outcomes = responses.map((response) => response.body.extensions?.cache?.response).sort();
      expect(outcomes).toEqual([...Array(7).fill('coalesced'), 'oversized']);
      expect(f.calls.slowBig).toBe(1);
      // A small one is stored.
      await post(url, big, { variables: { size: 10 } });
      expect((await post(url, big, { variables: { size: 10 } })).body.extensions?.cache?.response).toBe('hit');
    } finally {
      await stop();
      await f.cache.close();
      await client?.quit();
    }
  });
});

describe.each(['apollo', 'yoga'] as Server[])(
  '%s: concurrent identical requests whose result is not stored',
  (kind) => {
    it('an oversized result: one execution, shared with the requests waiting on it, never stored', async () => {
      const f = responseFixture();
      const { url, stop } = await serve(kind, f, { maxBytes: 1000 });
      try {
        const query = '{ slowBig(size: 2000) }';
        const pending = Array.from({ length: 10 }, () => post(url, query));
        await until(() => f.calls.slowBig === 1, 'the execution');
        await until(() => joined(f) === 9, 'every request joined the execution');
        f.gate.open();
        const responses = await Promise.all(pending);
        for (const response of responses) expect(response.body.data.slowBig).toHaveLength(2000);
        const outcomes = responses.map((response) => response.body.extensions?.cache?.response).sort();
        expect(outcomes).toEqual([...Array(9).fill('coalesced'), 'oversized']);
        expect(f.calls.slowBig).toBe(1);
        // Not stored: the next request executes again.
        expect((await post(url, query)).body.extensions?.cache?.response).toBe('oversized');
        expect(f.calls.slowBig).toBe(2);
      } finally {
        await stop();
      }
    });

    it('a result with errors: the requests waiting on it contend once more, then execute themselves, and say why', async () => {
      const f = responseFixture();
      const { url, stop } = await serve(kind, f);
      try {
        const pending = Array.from({ length: 4 }, () => post(url, '{ slowBroken }'));
        await until(() => f.calls.slowBroken === 1, 'the execution');
        await until(() => joined(f) === 3, 'every request joined the execution');
        f.gate.open();
        const responses = await Promise.all(pending);
        for (const response of responses) expect(response.body.errors?.[0]).toMatchObject({ message: 'broken' });
        expect(f.calls.slowBroken).toBe(4);
        for (const response of responses) expect(response.body.extensions?.cache?.response).toBe('miss');
        // The first execution's errors; of the 3 waiting on it, one executed for the other 2 (errors
        // again), and those 2 then executed themselves.
        const reasons = responses.map(
          (response) => (response.body.extensions?.cache as { notStoredReason?: string }).notStoredReason,
        );
        expect(reasons.sort()).toEqual(['errors', 'errors', 'not_shared', 'not_shared']);
        expect(joined(f)).toBe(5);
      } finally {
        await stop();
      }
    });
  },
);

describe.each<Server>(['apollo', 'yoga'])(
  '%s: anonymous requests while a signed-in viewer’s execution runs',
  (kind) => {
    it('are keyed apart from it (as Apollo keys them) and share one execution of their own, stored: 2 executions for 1 + 8 requests', async () => {
      const f = responseFixture();
      const { url, stop } = await serve(kind, f);
      try {
        const query = '{ slowRecommendations }';
        const signedIn = post(url, query, { session: 'ann' });
        await until(() => f.calls['slowRecommendations:ann'] === 1, 'the signed-in execution');
        const anonymous = Array.from({ length: 8 }, () => post(url, query));
        await until(() => f.calls['slowRecommendations:-'] === 1, 'one anonymous execution');
        await until(() => joined(f) === 7, 'the other anonymous requests joined it, not the signed-in one');
        f.gate.open();
        const mine = await signedIn;
        expect(mine.body.data.slowRecommendations).toBe('picked for ann');
        expect(mine.body.extensions?.cache).toMatchObject({ response: 'miss', notStoredReason: 'stricter_hint' });
        const responses = await Promise.all(anonymous);
        for (const response of responses) expect(response.body.data.slowRecommendations).toBe('popular');
        // One execution for all of them (never the signed-in viewer's), stored.
        expect(f.calls['slowRecommendations:-']).toBe(1);
        const outcomes = responses.map((response) => response.body.extensions?.cache?.response).sort();
        expect(outcomes).toEqual([
          'coalesced',
          'coalesced',
          'coalesced',
          'coalesced',
          'coalesced',
          'coalesced',
          'coalesced',
          'miss',
        ]);
        expect((await post(url, query)).body.extensions?.cache?.response).toBe('hit');
        expect(f.calls['slowRecommendations:-']).toBe(1);
        // A signed-in viewer is never given the anonymous answer: its key is the same, its result its own.
        const again = await post(url, query, { session: 'bob' });
        expect(again.body.data.slowRecommendations).not.toBe('picked for ann');
      } finally {
        await stop();
      }
    });
  },
);

describe('two replicas on one Redis: an oversized result', () => {
  it('40 concurrent identical requests, 20 to each replica, execute at most once per replica', async () => {
    const prefix = randomPrefix('resp-big');
    const a = responseFixture({ store: redisStore({ client: await client(), prefix }) });
    const b = responseFixture({ store: redisStore({ client: await client(), prefix }) });
    const sa = await serve('apollo', a, { maxBytes: 1000 });
    const sb = await serve('yoga', b, { maxBytes: 1000 });
    try {
      const pending = Array.from({ length: 40 }, (_, i) =>
        post(i % 2 === 0 ? sa.url : sb.url, '{ slowBig(size: 2000) }'),
      );
      await until(() => (a.calls.slowBig ?? 0) + (b.calls.slowBig ?? 0) === 1, 'the first execution');
      // Counted, not slept: each replica's other 19 requests joined its own flight.
      await until(() => joined(a) === 19 && joined(b) === 19, 'every request joined its replica');
      a.gate.open();
      b.gate.open();
      const responses = await Promise.all(pending);
      for (const response of responses) expect(response.body.data.slowBig).toHaveLength(2000);
      // The replica holding the lock shares its result in the process; the other finds nothing
      // stored when the lock is released and executes once for its own waiters: 2 (before: 40).
      expect((a.calls.slowBig ?? 0) + (b.calls.slowBig ?? 0)).toBe(2);
    } finally {
      await Promise.all([sa.stop(), sb.stop()]);
    }
  }, 60_000);
});

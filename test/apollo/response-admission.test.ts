/**
 * The response layer's admission (src/graphql/response-admission) on Apollo Server 5 over HTTP:
 * once `unreadLimit` responses of an operation were stored in a row and none was read, only 1 in
 * `unreadLimit` of its misses is stored (`notStoredReason: 'not_admitted'`, `response: 'miss'`),
 * until a response of it is read (a hit, or a request joining an execution). Apollo keeps parsed
 * documents, so one query text asked with distinct variables is one operation. The engine's own
 * rules: test/graphql/response-admission.test.ts.
 */
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { Registry } from 'prom-client';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { manualClock } from '../../src/core/freshness';
import { RESPONSES_METRIC } from '../../src/prometheus/metrics';
import { makeSchema } from '../graphql/fixtures';
import { post, responseFixture, until, type Posted, type ResponseFixture } from '../graphql/response-fixture';
import { memoryAndRedis } from '../redis/helpers';
import { serveApollo, type SessionContext } from './serve';

/** One operation (one query text: one parsed document on the server), asked per user id. */
const USER = 'query User($id: ID!) { user(id: $id) { id name } }';

/** Users 1..200, so every id asked has an answer (and its own resolver count, `user:<id>`). */
const manyNames = () => new Map(Array.from({ length: 200 }, (_, i) => [String(i + 1), `user ${i + 1}`]));

/** What the response layer reported: `miss` (stored), `miss:not_admitted`, `hit`, `coalesced`… */
function outcomeOf(r: Posted): string {
  const cache = r.body.extensions?.cache as { response?: string; notStoredReason?: string } | undefined;
  return cache?.notStoredReason === undefined ? String(cache?.response) : `${cache.response}:${cache.notStoredReason}`;
}

/** Asks user `id`, checks the answer, and returns the outcome. */
async function ask(url: string, id: number): Promise<string> {
  const r = await post(url, USER, { variables: { id: String(id) } });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data).toEqual({ user: { id: String(id), name: `user ${id}` } });
  return outcomeOf(r);
}

const askAll = async (url: string, ids: number[]) => {
  const outcomes: string[] = [];
  for (const id of ids) outcomes.push(await ask(url, id));
  return outcomes;
};

/** The main case with `unreadLimit: 2` (Apollo and Yoga alike: test/envelop/response-admission.test.ts). */
async function expectAdmission(url: string, f: ResponseFixture): Promise<void> {
  // 2 stored in a row, unread: then 1 in 2 misses is stored, then 1 in 4 (the sample grows rarer, none read).
  expect(await askAll(url, [1, 2, 3, 4, 5, 6, 7, 8])).toEqual([
    'miss', 'miss', 'miss:not_admitted', 'miss', 'miss:not_admitted', 'miss:not_admitted', 'miss:not_admitted', 'miss',
  ]); // prettier-ignore
  for (let id = 1; id <= 8; id++) expect(f.calls[`user:${id}`]).toBe(1);
  // Not stored: a miss again (executed again), stored this time: asked a second time.
  expect(await ask(url, 3)).toBe('miss');
  expect(f.calls['user:3']).toBe(2);
  // Stored: a hit (not executed again). That read ends the skipping.
  expect(await ask(url, 4)).toBe('hit');
  expect(f.calls['user:4']).toBe(1);
  // Every miss stored again, until 2 more in a row are unread.
  expect(await askAll(url, [9, 10, 11])).toEqual(['miss', 'miss', 'miss:not_admitted']);
  // 9 was stored (a hit: read again), so 11, skipped just before, is stored now.
  expect(await askAll(url, [9, 11, 11])).toEqual(['hit', 'miss', 'hit']);
  expect(f.calls['user:9']).toBe(1);
  expect(f.calls['user:11']).toBe(2);
}

/** A page per n, its resolver gated in the tests that hold an execution open. */
const typeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query { page(n: Int!): Page @cacheControl(maxAge: 60) }
  type Page { n: Int!, title: String! }
`;
const PAGE = 'query Page($n: Int!) { page(n: $n) { n title } }';

const stores = memoryAndRedis('resp-admission');

describe.each(stores)('Apollo response admission (%s store)', (_name, store) => {
  it('unreadLimit 2: after 2 unread stores, 1 in 2 misses is stored, then 1 in 4 (not_admitted); a hit stores every miss again', async () => {
    const f = responseFixture({ store: store(), names: manyNames() });
    const { url, stop } = await serveApollo(f.schema, f.cache, { unreadLimit: 2 });
    try {
      await expectAdmission(url, f);
    } finally {
      await stop();
    }
  });
});

describe('Apollo response admission', () => {
  it('unreadLimit: false stores every response: 50 distinct values, each asked again, are all hits', async () => {
    const f = responseFixture({ names: manyNames() });
    const { url, stop } = await serveApollo(f.schema, f.cache, { unreadLimit: false });
    try {
      const ids = Array.from({ length: 50 }, (_, i) => i + 1);
      expect(await askAll(url, ids)).toEqual(Array(50).fill('miss'));
      expect(await askAll(url, ids)).toEqual(Array(50).fill('hit'));
      for (const id of ids) expect(f.calls[`user:${id}`]).toBe(1);
    } finally {
      await stop();
    }
  });

  it('herdcache_responses_total counts a not_admitted request as outcome "miss"', async () => {
    const registry = new Registry();
    const f = responseFixture({ names: manyNames() });
    const server = new ApolloServer({
      schema: f.schema,
      plugins: [herdcachePlugin({ cache: f.cache, registry, extensions: true, responseCache: { unreadLimit: 2 } })],
    });
    const { url } = await startStandaloneServer(server, { listen: { port: 0, host: '127.0.0.1' } });
    const counts = async () => {
      const out: Record<string, number> = {};
      for (const { labels, value } of (await registry.getSingleMetric(RESPONSES_METRIC)!.get()).values)
        out[`${labels.operation}/${labels.outcome}`] = value;
      return out;
    };
    try {
      expect(await askAll(url, [1, 2, 3, 4, 5])).toEqual([
        'miss',
        'miss',
        'miss:not_admitted',
        'miss',
        'miss:not_admitted',
      ]);
      expect(await counts()).toEqual({ 'User/miss': 5 });
      // The hit ends the skipping: the next 2 misses are stored, then skipping again.
      expect(await askAll(url, [4, 6, 7, 8])).toEqual(['hit', 'miss', 'miss', 'miss:not_admitted']);
      expect(await counts()).toEqual({ 'User/miss': 8, 'User/hit': 1 });
    } finally {
      await server.stop();
    }
  });

  it('refuses unreadLimit 0, naming responseCache.unreadLimit', () => {
    const cache = createCache();
    expect(() => herdcachePlugin({ cache, responseCache: { unreadLimit: 0 } })).toThrow(
      'option "responseCache.unreadLimit" must be false or an integer from 1 to 1e9, got 0',
    );
    for (const unreadLimit of [1, 1e9, false] as const)
      expect(() => herdcachePlugin({ cache, responseCache: { unreadLimit } })).not.toThrow();
  });
});

describe('Apollo response admission: concurrent identical requests while skipped', () => {
  it('20 concurrent requests while the operation is skipped: 1 execution, stored and shared (19 coalesced); the joins are reads', async () => {
    const calls: Record<number, number> = {};
    let gate: Promise<void> | undefined;
    let open = () => {};
    const schema = makeSchema(typeDefs, {
      Query: {
        page: async (_p, { n }: { n: number }) => {
          calls[n] = (calls[n] ?? 0) + 1;
          if (gate !== undefined) await gate;
          return { n, title: `page ${n}` };
        },
      },
    });
    const cache = createCache();
    const joined = () => cache.metrics().sources.response?.coalesced ?? 0;
    const { url, stop } = await serveApollo(schema, cache, { unreadLimit: 3 });
    const askPage = async (n: number) => {
      const r = await post(url, PAGE, { variables: { n } });
      expect(r.body.data).toEqual({ page: { n, title: `page ${n}` } });
      return outcomeOf(r);
    };
    const askPages = async (ns: number[]) => {
      const outcomes: string[] = [];
      for (const n of ns) outcomes.push(await askPage(n));
      return outcomes;
    };
    try {
      // 3 stored unread, 2 skipped, the 3rd skipped stored: the next miss is skipped.
      expect(await askPages([1, 2, 3, 4, 5, 6])).toEqual([
        'miss', 'miss', 'miss', 'miss:not_admitted', 'miss:not_admitted', 'miss',
      ]); // prettier-ignore
      expect(joined()).toBe(0);
      gate = new Promise<void>((resolve) => (open = resolve));
      const pending = Array.from({ length: 20 }, () => askPage(7));
      await until(() => calls[7] === 1, 'the execution of page 7');
      // Every other request joined that execution (counted as it joins) before it ends.
      await until(() => joined() === 19, '19 requests joining the execution');
      gate = undefined;
      open();
      const outcomes = await Promise.all(pending);
      expect(calls[7]).toBe(1);
      // Requests waited on it: stored (walked, tagged) and shared, whatever the rule said for a miss alone.
      expect(outcomes.filter((o) => o === 'miss')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'coalesced')).toHaveLength(19);
      // The joins were reads: every miss is stored again (without them, 8 would be skipped).
      expect(await askPages([8, 9, 10, 11])).toEqual(['miss', 'miss', 'miss', 'miss:not_admitted']);
      expect(await askPage(7)).toBe('hit');
      expect(calls[7]).toBe(1);
      expect(await askPage(8)).toBe('hit');
      expect(calls[8]).toBe(1);
    } finally {
      open();
      await stop();
    }
  });
});

describe('Apollo response admission: a miss that read a stale @cached field', () => {
  it('is stored for a second (stale_fields, max-age=1) even while its operation is skipped, not left unstored', async () => {
    const clock = manualClock();
    const f = responseFixture({ cache: createCache({ clock }), names: manyNames() });
    const { url, stop } = await serveApollo(f.schema, f.cache, { unreadLimit: 3 });
    const query = 'query UserTick($id: ID!) { user(id: $id) { id name } swrTick }';
    const askTick = async (id: number) => {
      const r = await post(url, query, { variables: { id: String(id) } });
      expect(r.body.data).toEqual({ user: { id: String(id), name: `user ${id}` }, swrTick: 1 });
      return r;
    };
    try {
      const first: string[] = [];
      for (const id of [1, 2, 3, 4]) first.push(outcomeOf(await askTick(id)));
      expect(first).toEqual(['miss', 'miss', 'miss', 'miss:not_admitted']); // the next miss alone: skipped too
      clock.advance(11_000); // swrTick past its ttl (10 s), within its swr (60 s): served stale
      const stale = await askTick(5); // skipped alone, but it read a stale field
      expect(outcomeOf(stale)).toBe('miss:stale_fields');
      await until(() => f.cache.inFlight === 0, 'the field refresh');
      // Stored for its second: a hit now, said so in its header.
      const hit = await askTick(5);
      expect(outcomeOf(hit)).toBe('hit');
      expect(hit.headers.get('cache-control')).toBe('max-age=1, public');
    } finally {
      await stop();
    }
  });
});

describe("Apollo: a result shared without being stored is not the executing request's own object", () => {
  // Marks the response of a signed-in viewer, in place, after herdcache handed its result over.
  const personalise: ApolloServerPlugin<SessionContext> = {
    async requestDidStart() {
      return {
        async willSendResponse({ contextValue, response }) {
          const data = response.body.kind === 'single' ? response.body.singleResult.data : undefined;
          const page = data?.page as { title: string } | undefined;
          if (contextValue.session !== undefined && page !== undefined)
            page.title += ` (seen by ${contextValue.session})`;
        },
      };
    },
  };

  it("stored where the walk makes no copy (a response key selected twice): a later plugin's change does not reach the stored response", async () => {
    const schema = makeSchema(typeDefs, { Query: { page: (_p, { n }: { n: number }) => ({ n, title: `page ${n}` }) } });
    const cache = createCache();
    const { url, stop } = await serveApollo(schema, cache, true, [personalise]);
    const twice = 'query Twice($n: Int!) { page(n: $n) { n title ...F } } fragment F on Page { n }';
    try {
      const first = await post(url, twice, { variables: { n: 1 }, session: 'alice' });
      expect([outcomeOf(first), first.body.data]).toEqual([
        'miss',
        { page: { n: 1, title: 'page 1 (seen by alice)' } },
      ]);
      const hit = await post(url, twice, { variables: { n: 1 } });
      expect([outcomeOf(hit), hit.body.data]).toEqual(['hit', { page: { n: 1, title: 'page 1' } }]);
    } finally {
      await stop();
    }
  });

  it('too large to store: a plugin after herdcache changing its own response does not change what the joiners get', async () => {
    let gate: Promise<void> | undefined;
    let open = () => {};
    let calls = 0;
    const schema = makeSchema(typeDefs, {
      Query: {
        page: async (_p, { n }: { n: number }) => {
          calls++;
          if (gate !== undefined) await gate;
          return { n, title: `page ${n}` };
        },
      },
    });
    const cache = createCache();
    const { url, stop } = await serveApollo(schema, cache, { maxBytes: 10 }, [personalise]);
    try {
      gate = new Promise<void>((resolve) => (open = resolve));
      const leader = post(url, PAGE, { variables: { n: 1 }, session: 'alice' });
      await until(() => calls === 1, 'the execution');
      const joiners = Array.from({ length: 3 }, () => post(url, PAGE, { variables: { n: 1 } }));
      await until(() => (cache.metrics().sources.response?.coalesced ?? 0) === 3, 'the joins');
      open();
      expect((await leader).body.data).toEqual({ page: { n: 1, title: 'page 1 (seen by alice)' } });
      for (const joined of await Promise.all(joiners)) {
        expect(outcomeOf(joined)).toBe('coalesced');
        expect(joined.body.data).toEqual({ page: { n: 1, title: 'page 1' } });
      }
      expect(calls).toBe(1);
    } finally {
      open();
      await stop();
    }
  });
});

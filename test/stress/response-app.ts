/**
 * The application of the response-layer stress (./response-settle.ts): a schema whose answers say
 * what they were computed from, so a model can check every response it gets.
 *
 * - Entities carry their version: a user's name is `u<id>:v<version>`, a score `s<id>:v<version>`;
 *   a write bumps the version (a mutation, or the database directly before cache.invalidateTags).
 * - The viewer's own data says whose it is: `viewer <session>` (`viewer -` without a session),
 *   behind a PRIVATE field (`me`) and behind PUBLIC fields made PRIVATE at run time (`hinted` by
 *   setResponseCacheHint, `dynamic` by Apollo's info.cacheControl.setCacheHint); `recs of
 *   <session>` is made PRIVATE for a signed-in viewer only (`recs of -`, anonymous, is public).
 * - `flaky` fails on some executions (drawn from the seed), `short` sets a shorter maxAge at run
 *   time (stored and shared for that long), `ticker` is cached with swr, `burst(nonce)` counts its executions per nonce.
 * Every resolver waits a little (drawn from the seed), so executions overlap writes and joiners.
 */
import type { Cache } from '../../src/core';
import { cachedDirectiveTransformer, setResponseCacheHint } from '../../src/graphql';
import { makeSchema } from '../graphql/fixtures';

export const stressTypeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query {
    user(id: ID!): User @cacheControl(maxAge: 60)
    users: [User!]! @cacheControl(maxAge: 60)
    score(id: ID!): String @cacheControl(maxAge: 60) @cached(ttl: 60, tags: ["Score:{args.id}"])
    me: Viewer @cacheControl(maxAge: 60, scope: PRIVATE)
    hinted: String @cacheControl(maxAge: 60)
    dynamic: String @cacheControl(maxAge: 60)
    short: Int @cacheControl(maxAge: 60)
    recs: String @cacheControl(maxAge: 60)
    flaky(n: Int!): Int @cacheControl(maxAge: 60)
    flakyList(n: Int!): [Int] @cacheControl(maxAge: 60) @cached(ttl: 60)
    ticker: Int @cacheControl(maxAge: 10) @cached(ttl: 10, swr: 60)
    burst(nonce: Int!): Int @cacheControl(maxAge: 60)
    big(id: ID!): String @cacheControl(maxAge: 60)
  }
  type Mutation {
    renameUser(id: ID!): User @invalidates(tags: ["User:{args.id}"])
    renameUserEntity(id: ID!): User
  }
  type User { id: ID!, name: String! }
  type Viewer { id: ID!, name: String! }
`;

/**
 * `memo`: a per-request memo of `user` reads, made with each request's context as applications
 * make their DataLoaders: a run apart must not reuse one filled before an invalidation.
 */
export type StressContext = { session?: string; memo?: Map<string, unknown> };

/** The database the resolvers read: versions per entity, and execution counts. */
export interface StressDb {
  users: Map<string, number>;
  scores: Map<string, number>;
  /** Executions of `burst` per nonce. */
  bursts: Map<number, number>;
  tickers: number;
  /** flakyList's executions: every third fails its middle item. */
  flakyLists: number;
  /** Executions of the root fields that read entities (each one is an execution of its operation). */
  executions: number;
}

export const USER_IDS = ['1', '2', '3'];

/** The length of `big`'s answer: over the stress's responseCache.maxBytes (STRESS_MAX_BYTES). */
const BIG_BYTES = 3000;
/** responseCache.maxBytes in the stress: `big` is over it, every other answer under. */
export const STRESS_MAX_BYTES = 2048;

export function stressDb(): StressDb {
  return {
    users: new Map(USER_IDS.map((id) => [id, 0])),
    scores: new Map(USER_IDS.map((id) => [id, 0])),
    bursts: new Map(),
    tickers: 0,
    flakyLists: 0,
    executions: 0,
  };
}

/**
 * Told of the entity versions (`u1`, `s2`) one resolver call read, when it read them, whoever its
 * execution is for (a request, an aborted one, a run apart); it calls the answer when it returns.
 */
export type ReadLog = (reads: readonly (readonly [entity: string, version: number])[]) => () => void;

const unlogged: ReadLog = () => () => {};

/** A schema on `db` whose @cached fields use `cache`; `random` draws the resolvers' delays and flaky's failures. */
export function stressSchema(db: StressDb, random: () => number, cache: Cache, log: ReadLog = unlogged) {
  const wait = async () => {
    const r = random();
    if (r < 0.3) return;
    if (r < 0.6) await new Promise<void>((resolve) => setImmediate(resolve));
    else if (r < 0.85) await new Promise<void>((resolve) => setTimeout(resolve, Math.floor(random() * 4)));
    else await new Promise<void>((resolve) => setTimeout(resolve, 5 + Math.floor(random() * 20))); // long enough for a write to land
  };
  const user = (id: string) => (db.users.has(id) ? { id, name: `u${id}:v${db.users.get(id)}` } : null);
  const logged = (ids: readonly string[]) =>
    log(ids.filter((id) => db.users.has(id)).map((id) => [`u${id}`, db.users.get(id)!] as const));
  const viewer = (ctx: StressContext) => `viewer ${ctx.session ?? '-'}`;
  type Info = { cacheControl?: { setCacheHint(hint: object): void } };
  const schema = makeSchema(stressTypeDefs, {
    Query: {
      // Each reads the database, then takes a while: a write may land during the execution.
      user: async (_p, { id }: { id: string }, ctx: StressContext) => {
        db.executions++;
        const memo = ctx.memo;
        const returned = memo?.has(id) === true ? () => {} : logged([id]); // a memo's answer was logged when read
        const found =
          memo === undefined ? user(id) : memo.has(id) ? memo.get(id) : (memo.set(id, user(id)), memo.get(id));
        await wait();
        returned();
        return found;
      },
      users: async () => {
        db.executions++;
        const returned = logged(USER_IDS);
        const found = USER_IDS.map(user);
        await wait();
        returned();
        return found;
      },
      score: async (_p, { id }: { id: string }) => {
        db.executions++;
        const version = db.scores.get(id);
        const returned = log(version === undefined ? [] : [[`s${id}`, version]]);
        await wait();
        returned();
        return `s${id}:v${version}`;
      },
      me: async (_p, _a, ctx: StressContext) => {
        await wait();
        return { id: `v-${ctx.session}`, name: viewer(ctx) };
      },
      hinted: async (_p, _a, ctx: StressContext) => {
        setResponseCacheHint(ctx, { scope: 'PRIVATE' });
        await wait();
        return viewer(ctx);
      },
      dynamic: async (_p, _a, ctx: StressContext, info) => {
        await wait();
        (info as unknown as Info).cacheControl?.setCacheHint({ scope: 'PRIVATE' });
        return viewer(ctx);
      },
      // Public for anonymous viewers, the viewer's own (made PRIVATE) for a signed-in one.
      recs: async (_p, _a, ctx: StressContext) => {
        if (ctx.session !== undefined) setResponseCacheHint(ctx, { scope: 'PRIVATE' });
        await wait();
        return `recs of ${ctx.session ?? '-'}`;
      },
      short: async (_p, _a, ctx: StressContext) => {
        await wait();
        setResponseCacheHint(ctx, { maxAge: 5 });
        return 5;
      },
      flaky: async (_p, { n }: { n: number }) => {
        await wait();
        if (random() < 0.35) throw new Error(`flaky ${n} failed`);
        return n;
      },
      ticker: async () => {
        await wait();
        return ++db.tickers;
      },
      // Over the stress's responseCache.maxBytes: shared with the requests waiting on it, never stored.
      big: async (_p, { id }: { id: string }) => {
        const version = db.users.get(id);
        const returned = logged([id]);
        await wait();
        returned();
        return `u${id}:v${version}:${'x'.repeat(BIG_BYTES)}`;
      },
      // A @cached list whose middle item fails on every third execution (no draw: the seed's other
      // draws stay as they were): answered item by item, never cached with the failure.
      flakyList: async (_p, { n }: { n: number }) => {
        const fails = ++db.flakyLists % 3 === 0;
        await new Promise<void>((resolve) => setTimeout(resolve, 1));
        return [n, fails ? Promise.reject(new Error(`item of ${n} failed`)) : n + 1, n + 2];
      },
      burst: async (_p, { nonce }: { nonce: number }) => {
        db.bursts.set(nonce, (db.bursts.get(nonce) ?? 0) + 1);
        await new Promise<void>((resolve) => setTimeout(resolve, 2));
        return nonce;
      },
    },
    Mutation: {
      renameUser: async (_p, { id }: { id: string }) => {
        db.users.set(id, db.users.get(id)! + 1);
        const written = user(id);
        await wait();
        return written;
      },
      renameUserEntity: async (_p, { id }: { id: string }) => {
        db.users.set(id, db.users.get(id)! + 1);
        const written = user(id);
        await wait();
        return written;
      },
    },
  });
  cachedDirectiveTransformer(schema, { cache });
  return schema;
}

/** One query the stress sends, and what its answer may be. */
export interface StressQuery {
  readonly label: string;
  readonly query: string;
  readonly variables?: Record<string, unknown>;
  /** Never stored nor shared: a runtime hint makes it stricter than its key (or it has no session). */
  readonly neverShared?: boolean;
  /** Apollo only (info.cacheControl). */
  readonly apolloOnly?: boolean;
  /** May answer with errors (flaky). */
  readonly mayFail?: boolean;
  /** Served stale at times (swr). */
  readonly swr?: boolean;
  /** PRIVATE: the Cache-Control header must never say public. */
  readonly private?: boolean;
  /** A runtime hint shortens it to this maxAge: stored and shared for that long, its header never longer. */
  readonly maxAge?: number;
}

export function stressQueries(random: () => number, bigRandom?: () => number): () => StressQuery {
  const id = () => USER_IDS[Math.floor(random() * USER_IDS.length)]!;
  const makers: (() => StressQuery)[] = [
    () => ({ label: 'user', query: 'query U($id: ID!) { user(id: $id) { id name } }', variables: { id: id() } }),
    // The same operation spelled otherwise (one key: whitespace does not matter), and a different one.
    () => ({
      label: 'user-spaced',
      query: 'query U($id: ID!) {\n  user(id: $id) {\n id name } }',
      variables: { id: id() },
    }),
    () => ({ label: 'user-inline', query: `{ user(id: "${id()}") { name id } }` }),
    () => ({ label: 'users', query: '{ users { id name } }' }),
    () => ({ label: 'score', query: `{ score(id: "${id()}") }` }),
    () => ({ label: 'score+user', query: `{ score(id: "${id()}") user(id: "${id()}") { id name } }` }),
    () => ({ label: 'me', query: '{ me { id name } }', private: true }),
    () => ({ label: 'me+users', query: '{ me { name } users { id name } }', private: true }),
    () => ({ label: 'hinted', query: '{ hinted users { id name } }', neverShared: true, private: true }),
    () => ({ label: 'dynamic', query: '{ dynamic user(id: "1") { id name } }', neverShared: true, apolloOnly: true }),
    () => ({ label: 'short', query: '{ short user(id: "2") { id name } }', maxAge: 5 }),
    () => ({
      label: 'flaky',
      query: `{ flaky(n: ${Math.floor(random() * 3)}) user(id: "3") { id name } }`,
      mayFail: true,
    }),
    () => ({ label: 'ticker', query: '{ ticker }', swr: true }),
    // Stored when an anonymous viewer asks; refreshed (swr) in the background of whoever asks next.
    () => ({ label: 'ticker+recs', query: '{ ticker recs }', swr: true }),
    () => ({ label: 'ticker+user', query: `{ ticker user(id: "${id()}") { id name } }`, swr: true }),
  ];
  // `big` (over maxBytes) now and then, drawn apart: the other draws stay the seed's.
  return () => {
    const query = makers[Math.floor(random() * makers.length)]!();
    if (bigRandom === undefined) return query;
    const apart = bigRandom();
    if (apart < 0.06)
      return { label: 'big', query: `{ big(id: "${USER_IDS[Math.floor(bigRandom() * USER_IDS.length)]}") }` };
    // `flakyList` now and then, drawn apart too: answered item by item when its middle item fails.
    if (apart < 0.12)
      return { label: 'flakyList', query: `{ flakyList(n: ${Math.floor(bigRandom() * 3) * 10}) }`, mayFail: true };
    return query;
  };
}

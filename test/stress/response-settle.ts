/**
 * Every request answers, and every answer is one the cache may give: a seeded random stress of
 * the response layer through the real servers, with a watchdog and a model. Used by
 * test/stress/response-settle.test.ts.
 *
 * One run: Apollo Server 5 (executeOperation) and GraphQL Yoga 5 (with execution cancellation;
 * over HTTP, or its in-process fetch) with `responseCache`, on one memory cache, or on two caches
 * sharing one Redis prefix (two replicas: executions are shared across them through the fill
 * lock). The seed draws a stream of operations, issued in bursts that overlap: reads of identical
 * and varied queries (PUBLIC, PRIVATE, made PRIVATE or shorter at run time, failing at times,
 * swr) from several sessions and none; bursts of identical cold queries; mutations (@invalidates,
 * or the result entity alone); database writes followed by cache.invalidateTags; clock moves
 * (expiry, swr); Yoga clients that leave mid-request; on Redis, the server paused (SIGSTOP) for a
 * while in a chosen run.
 *
 * Checked: every request answers before the deadline (or was aborted by its client), nothing is
 * left in flight, nothing is unhandled; no response shows another session's data; no read issued
 * after a write completed shows data older than it; a stored or shared answer never has errors
 * and is never one a runtime hint made unshareable; the outcomes Apollo reports in
 * extensions.cache are the ones prom-client counted; a cold burst sent with nothing else running
 * is executed once per key (anonymous and signed-in requests are keyed apart; on Redis: once across
 * both replicas) and then a hit; an expired swr response
 * is served stale, never waited for. On a shared Redis store, a stale answer is told apart by how
 * it came (joinedAcross: it joined a load under way on its replica across a write on the other;
 * crossReplicaWindow: stored across replicas, the gap the tag clock closed), and fails all the same.
 */
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import { createYoga, useExecutionCancellation } from 'graphql-yoga';
import Redis from 'ioredis';
import { Registry } from 'prom-client';
import { herdcachePlugin } from '../../src/apollo';
import { createCache, memoryStore, type Cache } from '../../src/core';
import { useHerdcache } from '../../src/envelop';
import { redisStore } from '../../src/redis';
import { randomPrefix } from '../redis/helpers';
import {
  STRESS_MAX_BYTES,
  type StressContext,
  type StressQuery,
  USER_IDS,
  stressDb,
  stressQueries,
  stressSchema,
  type ReadLog,
} from './response-app';
import { prng } from './settle';

/** The session responseCache.enabled answers false for. */
const DISABLED_SESSION = 'off';

export interface ResponseStressOptions {
  seed: number;
  /** Requests issued (a burst counts each of its requests). */
  requests: number;
  store: 'memory' | 'redis';
  /** For 'redis': the server's URL. */
  redisUrl?: string;
  /**
   * For 'memory': the store's `max` (default 10,000, never reached here). A small one evicts and
   * restamps the @cached fields' slots (core/memory.ts) all through the run.
   */
  memoryMax?: number;
  /** For 'redis': pause this redis-server (SIGSTOP) for `ms` once `at` requests were issued. */
  pause?: { pid: number; at: number; ms: number };
  deadlineMs?: number;
}

export interface ResponseStressReport {
  seed: number;
  store: string;
  sent: number;
  answered: number;
  aborted: number;
  /** cache.clear() calls amid the mix (every fill in flight abandoned, its waiters start over). */
  clears: number;
  /** Requests still unanswered at the deadline. Must be empty. */
  pending: string[];
  /** Answers no cache may give (wrong outcome, errors where none can be, a public header on PRIVATE data). Must be empty. */
  wrong: string[];
  /** Answers showing another session's data. Must be 0. */
  leaks: number;
  /** Answers older than a write completed before they were asked. Must be empty. */
  stale: string[];
  /**
   * Stale answers served from the store (hit, stale) that an execution on one replica read
   * before a write on the other replica completed, and that ended after it: the response would
   * have been stored under the tag versions read at its end. Closed by the tag clock (the late
   * tags invalidated during the execution keep it out of the store). Must be 0; see
   * test/apollo/response-cache-replicas.test.ts.
   */
  crossReplicaWindow: number;
  /**
   * Stale answers of the same kind that joined, on their replica, a load under way across a write
   * on the other (coalesced): a read, or a wait for the other replica's fill lock, that began before
   * the write. Failed, as any stale answer: a caller coming during a read under way waits for its
   * answer and reads again (core/read-window), and one joining an execution after its tags' versions
   * were read starts its own (core/flight-table's seal); both tested in test/redis/response-remote-join.
   */
  joinedAcross: number;
  /**
   * Stale answers on one replica when every newer write of the entity completed before it was
   * asked was made on the other replica and left an invalidation Redis had not taken (its
   * replica's pendingInvalidations grew over the write: after the pause, the breaker still open, a
   * late timeout): that replica retries it, and reads nothing it covers meanwhile (core/unsent);
   * the other cannot know. Counted, not failed; on the writer's own replica it fails.
   */
  undelivered: number;
  unhandled: string[];
  inFlightAfter: number;
  /** Memory store: distinct keys written (past `memoryMax`, entries were evicted) and the entries held at the end. */
  keysWritten: number;
  /** The most entries the memory store held after a write (an invalidation may leave it less full at the end). */
  storeSize: number;
  /** extensions.cache.response tallies (all servers). */
  outcomes: Record<string, number>;
  /** Misses executed and shared, not stored: their operation's responses were not read (unreadLimit). */
  notAdmitted: number;
  /** Differences between Apollo's extensions and prom-client's herdcache_responses_total. Must be empty. */
  countMismatch: string[];
  /** Cold bursts sent with nothing else running (and not during a pause); what went wrong in them (more than one execution, an swr response waited for). */
  quietBursts: number;
  burstExtraExecutions: string[];
  /** Answers shared from a burst's one execution. */
  burstCoalesced: number;
  /** Yoga batches answered (each operation of one checked as a read). */
  batches: number;
  /** flakyList answers whose middle item failed (answered item by item). */
  partialLists: number;
  /** Answers to the session responseCache.enabled turns the layer off for (DISABLED_SESSION): bypassed, `disabled`. */
  disabled: number;
  lockContended: number;
  /** Writes not required to be seen: they overlapped the Redis pause (their invalidation may be lost). */
  exemptWrites: number;
}

type Kind = 'apollo' | 'yoga';
interface Answer {
  body?: {
    data?: unknown;
    errors?: unknown[];
    extensions?: { cache?: { response?: string; bypassReason?: string; notStoredReason?: string } };
  };
  header?: string | null;
  aborted?: boolean;
}

const OUTCOMES = new Set(['hit', 'miss', 'coalesced', 'stale', 'bypassed', 'oversized']);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function responseStress(options: ResponseStressOptions): Promise<ResponseStressReport> {
  const { seed, requests, deadlineMs = 15_000 } = options;
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const chance = (p: number) => random() < p;
  const offset = { ms: 0 };
  const clock = { now: () => Date.now() + offset.ms };
  const db = stressDb();
  const nextQuery = stressQueries(random, prng(seed ^ 0xb16));

  // The caches: one in memory, or two replicas on one Redis prefix (each its own connections).
  const connections: Redis[] = [];
  const connect = async () => {
    const client = new Redis(options.redisUrl!, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    connections.push(client);
    return client;
  };
  const prefix = randomPrefix(`response-settle:${seed}`);
  const store = memoryStore({ max: options.memoryMax });
  const keysWritten = new Set<string>();
  const setMany = store.setMany.bind(store);
  /** The most entries the store held after a write: full (its max) once it had to evict. */
  let fullest = 0;
  store.setMany = (writes) => {
    for (const write of writes) keysWritten.add(write.key);
    const written = setMany(writes);
    fullest = Math.max(fullest, store.size);
    return written;
  };
  const makeCache = async (): Promise<Cache> =>
    options.store === 'memory'
      ? createCache({ clock, store })
      : createCache({ clock, store: redisStore({ client: await connect(), subscriber: await connect(), prefix }) });
  const apolloCache = await makeCache();
  const yogaCache = options.store === 'memory' ? apolloCache : await makeCache();
  // Each replica its own schema (one database): @cached fields run through that replica's cache,
  // so their tags tag its responses.
  let now = 0;
  // Every read of an entity's version by a resolver, with its replica (0: Apollo's, 1: Yoga's) and
  // its logical time (see `now`): the executions whose requests never report (aborted, runs apart) too.
  const reads: { replica: number; entity: string; version: number; at: number; returned: number }[] = [];
  const reader =
    (replica: number): ReadLog =>
    (entities) => {
      const at = ++now;
      const made = entities.map(([entity, version]) => ({ replica, entity, version, at, returned: Infinity }));
      reads.push(...made);
      return () => {
        const returned = ++now;
        for (const read of made) read.returned = returned;
      };
    };
  const apolloSchema = stressSchema(db, prng(seed ^ 0x5eed), apolloCache, reader(0));
  const yogaSchema =
    options.store === 'memory' ? apolloSchema : stressSchema(db, prng(seed ^ 0xa1), yogaCache, reader(1));
  const caches = options.store === 'memory' ? [apolloCache] : [apolloCache, yogaCache];
  const responseCache = {
    sessionId: (ctx: StressContext) => ctx.session,
    // One session never uses the layer: executed alone, even beside identical requests of others.
    enabled: (ctx: StressContext) => ctx.session !== DISABLED_SESSION,
    maxBytes: STRESS_MAX_BYTES,
    // Small, so the stream's operations keep crossing it: misses executed and shared, not stored,
    // then stored again once a response of theirs is read (src/graphql/response-admission).
    unreadLimit: 2 + (seed % 3),
  };

  const registry = new Registry();
  const apollo = new ApolloServer<StressContext>({
    schema: apolloSchema,
    plugins: [herdcachePlugin<StressContext>({ cache: apolloCache, extensions: true, responseCache, registry })],
  });
  await apollo.start();
  const yoga = createYoga<StressContext>({
    schema: yogaSchema,
    plugins: [
      useExecutionCancellation(),
      useHerdcache<StressContext>({ cache: yogaCache, extensions: true, responseCache }),
    ],
    context: ({ request }) => {
      const session = request.headers.get('x-session');
      return session === null ? { memo: new Map() } : { session, memo: new Map() };
    },
    logging: false,
    maskedErrors: false,
    batching: { limit: 8 },
  });
  const http: Server = createServer((req, res) => void yoga(req, res));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/graphql`;

  const report: ResponseStressReport = {
    seed,
    store: options.store,
    sent: 0,
    answered: 0,
    aborted: 0,
    clears: 0,
    pending: [],
    wrong: [],
    leaks: 0,
    stale: [],
    crossReplicaWindow: 0,
    undelivered: 0,
    joinedAcross: 0,
    unhandled: [],
    inFlightAfter: 0,
    keysWritten: 0,
    storeSize: 0,
    outcomes: {},
    notAdmitted: 0,
    countMismatch: [],
    quietBursts: 0,
    burstExtraExecutions: [],
    burstCoalesced: 0,
    batches: 0,
    partialLists: 0,
    disabled: 0,
    lockContended: 0,
    exemptWrites: 0,
  };
  const onUnhandled = (reason: unknown) => report.unhandled.push(String(reason));
  process.on('unhandledRejection', onUnhandled);
  const wrong = (problem: string) => {
    if (report.wrong.length < 20) report.wrong.push(`${problem} (seed ${seed}, ${options.store})`);
  };

  /** Versions of completed writes, per entity (`u1`, `s2`): a read asked later must show at least these. */
  const committed = new Map<string, number>();
  // For telling answers of an execution that spanned a write on the other replica (see crossReplicaWindow) from any other stale answer, in logical time:
  // the executed reads (misses), the resolvers' reads (above) and the completed writes, with their replica (0: Apollo's cache, 1: Yoga's).
  const executed: { replica: number; start: number; end: number; versions: Map<string, number> }[] = [];
  const written: { replica: number; entity: string; version: number; end: number; unsent: boolean }[] = [];
  const staleAnswers: {
    entity: string;
    version: number;
    outcome: string;
    asked: number;
    replica: number;
    text: string;
  }[] = [];
  const replicaOf = (kind: Kind) => (kind === 'yoga' && options.store === 'redis' ? 1 : 0);
  let paused = false;
  let pauseEdges = 0;
  const apolloOutcomes: Record<string, number> = {};

  // --- sending ---------------------------------------------------------------------------------
  const pending = new Map<number, string>();
  let ids = 0;
  const track = <T>(what: string, promise: Promise<T>): Promise<T | undefined> => {
    const id = ++ids;
    report.sent++;
    pending.set(id, what);
    return promise.then(
      (value) => (pending.delete(id), value),
      (error: unknown) => {
        pending.delete(id);
        wrong(`${what} rejected: ${String(error)}`);
        return undefined;
      },
    );
  };
  const viaApollo = async (q: StressQuery, session: string | undefined): Promise<Answer> => {
    const response = await apollo.executeOperation(
      { query: q.query, variables: q.variables },
      { contextValue: session === undefined ? { memo: new Map() } : { session, memo: new Map() } },
    );
    if (response.body.kind !== 'single') return {};
    return { body: response.body.singleResult as Answer['body'], header: response.http.headers.get('cache-control') };
  };
  /**
   * Yoga, over HTTP or in process; `abort`: the client leaves at once (over HTTP: always an abort,
   * whatever the machine's speed, so the mix has some), after a tick, or after a short timer.
   */
  const viaYoga = async (q: StressQuery, session: string | undefined, abort: boolean): Promise<Answer> => {
    const controller = new AbortController();
    const leaveAtOnce = abort && chance(0.25);
    if (abort && !leaveAtOnce) {
      if (chance(0.5)) setImmediate(() => controller.abort());
      else setTimeout(() => controller.abort(), Math.floor(random() * 4));
    }
    const init = {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(session === undefined ? {} : { 'x-session': session }) },
      body: JSON.stringify({ query: q.query, variables: q.variables }),
      signal: controller.signal,
    };
    try {
      const sent = leaveAtOnce || chance(0.5) ? fetch(url, init) : yoga.fetch('http://yoga/graphql', init);
      if (leaveAtOnce) controller.abort();
      const response = await sent;
      const body = (await response.json()) as Answer['body'];
      return { body, header: response.headers.get('cache-control') };
    } catch (error) {
      if (controller.signal.aborted) return { aborted: true };
      throw error;
    }
  };

  /**
   * A batch of read operations to Yoga over HTTP (its `batching`), from one client and session: the
   * same operation twice sometimes (one waits on the other's execution), and the client may leave.
   * Each operation's answer is checked as a read's is (no Cache-Control check: one header for all).
   */
  const readBatch = (qs: StressQuery[], session: string | undefined, abort: boolean): void => {
    const asked = new Map(committed);
    const start = ++now;
    const what = `yoga batch [${qs.map((q) => `${q.label} ${JSON.stringify(q.variables ?? {})}`).join(', ')}] session:${session ?? '-'}${abort ? ' (may abort)' : ''}`;
    const controller = new AbortController();
    if (abort) setTimeout(() => controller.abort(), Math.floor(random() * 4));
    const sent = (async (): Promise<Answer[] | undefined> => {
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(session === undefined ? {} : { 'x-session': session }) },
          body: JSON.stringify(qs.map((q) => ({ query: q.query, variables: q.variables }))),
          signal: controller.signal,
        });
        const bodies = (await response.json()) as Answer['body'][];
        return bodies.map((body) => ({ body }));
      } catch (error) {
        if (controller.signal.aborted) return undefined;
        throw error;
      }
    })();
    void track(what, sent).then((answers) => {
      if (answers === undefined) return void report.aborted++;
      report.batches++;
      if (answers.length !== qs.length) return void wrong(`${what}: ${answers.length} answers`);
      report.answered += answers.length;
      const end = ++now;
      for (let i = 0; i < qs.length; i++) check(qs[i]!, 'yoga', session, { asked, start, end }, answers[i]!, what);
    });
  };

  /** Sends one query and checks its answer against the model. */
  const read = (
    q: StressQuery,
    kind: Kind,
    session: string | undefined,
    abort = false,
  ): Promise<Answer | undefined> => {
    const asked = new Map(committed);
    const start = ++now;
    const what = `${kind} ${q.label} ${q.query} ${JSON.stringify(q.variables ?? {})} session:${session ?? '-'}${abort ? ' (may abort)' : ''}`;
    const sent = kind === 'apollo' ? viaApollo(q, session) : viaYoga(q, session, abort);
    return track(what, sent).then((answer) => {
      if (answer === undefined) return undefined;
      if (answer.aborted) {
        report.aborted++;
        return answer;
      }
      report.answered++;
      check(q, kind, session, { asked, start, end: ++now }, answer, what);
      return answer;
    });
  };

  const check = (
    q: StressQuery,
    kind: Kind,
    session: string | undefined,
    { asked, start, end }: { asked: Map<string, number>; start: number; end: number },
    answer: Answer,
    what: string,
  ) => {
    const body = answer.body;
    const outcome = body?.extensions?.cache?.response ?? 'none';
    report.outcomes[outcome] = (report.outcomes[outcome] ?? 0) + 1;
    if (body?.extensions?.cache?.notStoredReason === 'not_admitted') report.notAdmitted++;
    if (kind === 'apollo') apolloOutcomes[outcome] = (apolloOutcomes[outcome] ?? 0) + 1;
    const failed = body?.errors !== undefined && body.errors.length > 0;
    if (!OUTCOMES.has(outcome)) wrong(`${what}: outcome ${outcome}`);
    if (failed && !q.mayFail) wrong(`${what}: errors ${JSON.stringify(body?.errors).slice(0, 200)}`);
    const served = outcome === 'hit' || outcome === 'coalesced' || outcome === 'stale';
    if (served && failed) wrong(`${what}: a ${outcome} answer with errors`);
    if (served && q.neverShared) wrong(`${what}: a ${outcome} answer of an unshareable operation`);
    if (session === DISABLED_SESSION && served) wrong(`${what}: a ${outcome} answer with the layer disabled`);
    if (body?.extensions?.cache?.bypassReason === 'disabled') {
      report.disabled++;
      if (session !== DISABLED_SESSION) wrong(`${what}: disabled for a session it is enabled for`);
    }
    if (outcome === 'stale' && !q.swr) wrong(`${what}: stale without swr`);
    if (q.private && /public/.test(answer.header ?? '')) wrong(`${what}: cache-control ${answer.header}`);
    const maxAge = /max-age=(\d+)/.exec(answer.header ?? '');
    if (q.maxAge !== undefined && maxAge !== null && Number(maxAge[1]) > q.maxAge)
      wrong(`${what}: cache-control ${answer.header}, longer than its runtime hint's ${q.maxAge} s`);
    if (q.label === 'flakyList' && body !== undefined) {
      // Item by item, as without a cache: [n, n + 1, n + 2], or its middle item null with its error there.
      const n = Number(/n: (\d+)/.exec(q.query)![1]);
      const list = (body.data as { flakyList?: unknown } | undefined)?.flakyList;
      const paths = (body.errors ?? []).map((error) => JSON.stringify((error as { path?: unknown }).path));
      const whole = JSON.stringify(list) === JSON.stringify([n, n + 1, n + 2]) && paths.length === 0;
      const partial =
        JSON.stringify(list) === JSON.stringify([n, null, n + 2]) &&
        JSON.stringify(paths) === '["[\\"flakyList\\",1]"]';
      if (!whole && !partial) wrong(`${what}: ${JSON.stringify(body).slice(0, 200)}`);
      if (partial) report.partialLists++;
    }
    const text = JSON.stringify(body?.data ?? null);
    for (const [, viewer] of text.matchAll(/viewer ([^"]+)"/g)) if (viewer !== (session ?? '-')) report.leaks++;
    // Anonymous and signed-in requests are keyed apart (sessionId given): a signed-in viewer is
    // never given the anonymous answer either.
    for (const [, viewer] of text.matchAll(/recs of ([^"]+)"/g)) if (viewer !== (session ?? '-')) report.leaks++;
    const versions = new Map<string, number>();
    for (const [, type, id, version] of text.matchAll(/"([us])(\d+):v(\d+)"/g)) {
      const entity = `${type}${id}`;
      versions.set(entity, Number(version));
      const want = asked.get(entity) ?? 0;
      if (Number(version) < want)
        staleAnswers.push({
          entity,
          version: Number(version),
          outcome,
          asked: start,
          replica: replicaOf(kind),
          text: `${what}: ${entity} v${version}, a write of v${want} had completed (${outcome}, seed ${seed}, ${options.store})`,
        });
    }
    if (outcome === 'miss') executed.push({ replica: replicaOf(kind), start, end, versions });
  };

  /** A write: `run` bumps the database and invalidates; its version is required of later reads once it completes. */
  const write = (what: string, entity: string, replica: number, run: () => Promise<number | undefined>) => {
    const edges = pauseEdges;
    const duringPause = paused;
    // Invalidations the writer's replica had not sent when the write began: one more when it
    // returned is (most likely) this write's, its store having refused it.
    const before = unsentCount(caches[replica]!);
    void track(what, run()).then((version) => {
      if (version === undefined) return;
      if (duringPause || paused || pauseEdges !== edges) {
        report.exemptWrites++;
        return;
      }
      committed.set(entity, Math.max(committed.get(entity) ?? 0, version));
      const unsent = unsentCount(caches[replica]!) > before;
      written.push({ replica, entity, version, end: ++now, unsent });
      // The writer's client reads its write back, on either server: a response stored older than it shows.
      const id = entity.slice(1);
      const probe: StressQuery =
        entity[0] === 'u'
          ? pick([
              { label: 'probe user', query: 'query U($id: ID!) { user(id: $id) { id name } }', variables: { id } },
              { label: 'probe users', query: '{ users { id name } }' },
            ])
          : { label: 'probe score', query: `{ score(id: "${id}") }` };
      for (const kind of ['apollo', 'yoga'] as const) if (chance(0.7)) void read(probe, kind, session());
    });
  };
  const mutate = (kind: Kind) => {
    const id = pick(USER_IDS);
    const field = chance(0.5) ? 'renameUser' : 'renameUserEntity';
    const q: StressQuery = { label: field, query: `mutation { ${field}(id: "${id}") { id name } }` };
    write(`${kind} ${field} ${id}`, `u${id}`, replicaOf(kind), async () => {
      const answer = kind === 'apollo' ? await viaApollo(q, undefined) : await viaYoga(q, undefined, false);
      const data = answer.body?.data as Record<string, { name: string }> | undefined;
      const outcome = answer.body?.extensions?.cache?.response;
      report.outcomes[outcome ?? 'none'] = (report.outcomes[outcome ?? 'none'] ?? 0) + 1;
      if (kind === 'apollo') apolloOutcomes[outcome ?? 'none'] = (apolloOutcomes[outcome ?? 'none'] ?? 0) + 1;
      if (outcome !== 'bypassed') wrong(`${kind} ${field}: outcome ${outcome}`);
      const name = data?.[field]?.name;
      if (name === undefined) {
        wrong(`${kind} ${field} answered ${JSON.stringify(answer.body).slice(0, 200)}`);
        return undefined;
      }
      report.answered++;
      return Number(/:v(\d+)$/.exec(name)![1]);
    });
  };
  const invalidate = () => {
    const id = pick(USER_IDS);
    const users = chance(0.5);
    const replica = Math.floor(random() * caches.length);
    const cache = caches[replica]!;
    const map = users ? db.users : db.scores;
    write(`invalidateTags ${users ? 'User' : 'Score'}:${id}`, `${users ? 'u' : 's'}${id}`, replica, async () => {
      const version = map.get(id)! + 1;
      map.set(id, version);
      await cache.invalidateTags([`${users ? 'User' : 'Score'}:${id}`]);
      return version;
    });
  };

  const sessions = ['a', 'b', 'c', 'd'];
  const session = () => (chance(0.15) ? undefined : pick(sessions));
  // Reads and joiners only (not the bursts counted for one execution): the layer off for some.
  const anySession = () => (chance(0.1) ? DISABLED_SESSION : session());
  const kindFor = (q: StressQuery): Kind => (q.apolloOnly ? 'apollo' : pick(['apollo', 'yoga'] as const));
  let nonce = 0;
  const operations: [number, () => void][] = [
    // A read: any query, any server, any session; a share of Yoga's clients leave mid-request.
    [
      40,
      () => {
        const q = nextQuery();
        const kind = kindFor(q);
        void read(q, kind, anySession(), kind === 'yoga' && chance(0.2));
      },
    ],
    // Identical requests at once, from several sessions and servers: joiners of every kind of operation.
    [
      10,
      () => {
        const q = nextQuery();
        for (let i = 4 + Math.floor(random() * 8); i > 0; i--) {
          const kind = kindFor(q);
          void read(q, kind, anySession(), kind === 'yoga' && chance(0.1));
        }
      },
    ],
    // Bursts of one new PUBLIC operation amid the rest: they share executions too.
    [
      6,
      () => {
        const q: StressQuery = { label: 'burst', query: `{ burst(nonce: ${++nonce}) }` };
        for (let i = 4 + Math.floor(random() * 10); i > 0; i--)
          void read(q, pick(['apollo', 'yoga'] as const), session());
      },
    ],
    // A Yoga batch of reads, the same operation twice at times.
    [
      6,
      () => {
        const qs: StressQuery[] = [];
        for (let i = 2 + Math.floor(random() * 3); i > 0; i--) {
          let q = nextQuery();
          while (q.apolloOnly) q = nextQuery();
          qs.push(q);
          if (chance(0.3)) qs.push(q);
        }
        readBatch(qs, anySession(), chance(0.15));
      },
    ],
    [12, () => mutate(pick(['apollo', 'yoga'] as const))],
    [8, invalidate],
    // The store emptied amid everything: every execution in flight abandoned, its waiters start over.
    [
      1,
      () => {
        report.clears++;
        void track('clear', pick(caches).clear());
      },
    ],
    [
      3,
      () => {
        offset.ms += Math.floor(random() * 20_000); // past ticker's maxAge (10 s), within its swr (60 s); others expire now and then
      },
    ],
  ];
  const total = operations.reduce((sum, [weight]) => sum + weight, 0);
  const draw = () => {
    let r = random() * total;
    for (const [weight, op] of operations) if ((r -= weight) < 0) return op;
    return operations[0]![1];
  };

  /**
   * Now and then, once every request so far has answered, with nothing else running: a cold burst
   * of a new PUBLIC operation on both servers is executed once (on Redis: once for both replicas,
   * through the fill lock), and a burst on an expired swr response waits for nothing (all stale or
   * hit, one at least stale).
   */
  const quiet = async (deadline: number) => {
    while (pending.size > 0 && Date.now() < deadline) await sleep(5);
    // Quiet means no execution either: a stale response's background refresh outlives its request
    // (a signed-in viewer's, made PRIVATE: the anonymous read below would wait on it, then execute
    // without storing, and the swr check would find nothing stored).
    while (caches.some((cache) => cache.inFlight > 0) && Date.now() < deadline) await sleep(1);
    // After a Redis pause the store may fail for a while (late replies, the breaker): not quiet.
    if (pending.size > 0 || paused || pauseEdges > 0) return;
    const n = ++nonce;
    const q: StressQuery = { label: 'quiet burst', query: `{ burst(nonce: ${n}) }` };
    const burst = Array.from({ length: 6 + Math.floor(random() * 10) }, () => session());
    const answers = await Promise.all(burst.map((viewer) => read(q, pick(['apollo', 'yoga'] as const), viewer)));
    const outcomes = answers.map((a) => a?.body?.extensions?.cache?.response);
    report.burstCoalesced += outcomes.filter((o) => o === 'coalesced').length;
    const executions = db.bursts.get(n) ?? 0;
    // One execution per key: anonymous and signed-in requests are keyed apart (sessionId given).
    const keys = new Set(burst.map((viewer) => viewer === undefined)).size;
    const again = await read(q, pick(['apollo', 'yoga'] as const), pick(burst));
    const stored = again?.body?.extensions?.cache?.response;
    // Stored for an anonymous viewer (public), and refreshed in the background of an anonymous one.
    const ticker: StressQuery = { label: 'quiet ticker', query: '{ ticker recs }', swr: true };
    offset.ms += 100_000; // everything expired, past any grace
    await read(ticker, 'apollo', undefined); // computed now
    offset.ms += 11_000; // past its maxAge, within its swr
    const stale = await Promise.all(
      Array.from({ length: 6 }, () => read(ticker, pick(['apollo', 'yoga'] as const), undefined)),
    );
    const served = stale.map((a) => a?.body?.extensions?.cache?.response);
    while (caches.some((cache) => cache.inFlight > 0) && Date.now() < deadline) await sleep(1); // the refresh
    await read(ticker, pick(['apollo', 'yoga'] as const), session());
    if (pauseEdges > 0) return; // Redis paused meanwhile: the store's failures make executions
    report.quietBursts++;
    if (executions !== keys || stored !== 'hit')
      report.burstExtraExecutions.push(
        `quiet burst ${n}: ${executions} executions for ${answers.length} requests of ${keys} key(s) (${outcomes}), then ${stored} (seed ${seed})`,
      );
    if (!served.includes('stale') || served.some((o) => o !== 'stale' && o !== 'hit'))
      report.burstExtraExecutions.push(`an expired swr response: ${served} (seed ${seed})`);
  };

  // --- the run ---------------------------------------------------------------------------------
  let resume: (() => void) | undefined;
  try {
    let quietAt = requests / 4;
    while (report.sent < requests) {
      if (report.sent >= quietAt) {
        quietAt += requests / 4;
        await quiet(Date.now() + deadlineMs);
      }
      if (options.pause !== undefined && !paused && pauseEdges === 0 && report.sent >= options.pause.at) {
        const { pid, ms } = options.pause;
        process.kill(pid, 'SIGSTOP');
        paused = true;
        pauseEdges++;
        resume = () => {
          resume = undefined;
          process.kill(pid, 'SIGCONT');
          paused = false;
          pauseEdges++;
        };
        setTimeout(() => resume?.(), ms);
      }
      for (let i = 1 + Math.floor(random() * 6); i > 0; i--) draw()();
      const pause = random();
      if (pause < 0.4) await Promise.resolve();
      else if (pause < 0.75) await new Promise<void>((resolve) => setImmediate(resolve));
      else await sleep(Math.floor(random() * 4));
    }
    // The watchdog: every request answers by the deadline; the rest are named.
    const deadline = Date.now() + deadlineMs;
    while (pending.size > 0 && Date.now() < deadline) await sleep(5);
    report.pending = [...pending.values()].slice(0, 20).map((what) => `${what} (seed ${seed}, ${options.store})`);
    // Fills in flight, the response layer's solo runs included (cache.inFlight counts them).
    const inFlight = () => caches.reduce((sum, cache) => sum + cache.inFlight, 0);
    while (inFlight() > 0 && Date.now() < deadline) await sleep(5);
    report.inFlightAfter = inFlight();
    report.keysWritten = keysWritten.size;
    report.storeSize = fullest;
    // A stale answer shows what an execution on one replica read before a write on the other
    // replica completed, while that execution ran: joined while it ran, or stored (the gap).
    for (const stale of staleAnswers) {
      const gap =
        options.store === 'redis' &&
        executed.some(
          (e) =>
            e.versions.get(stale.entity) === stale.version &&
            written.some(
              (w) =>
                w.entity === stale.entity &&
                w.version > stale.version &&
                w.replica !== e.replica &&
                w.end > e.start &&
                w.end < e.end,
            ),
        );
      // The same told from the resolvers' reads, whoever the execution ran for (a client that left,
      // a run apart, which report no miss): one that read this version on the other replica
      // before the write completed, and was still running when it completed and when this answer
      // was asked (so this answer could join it), spanned it.
      const joined =
        options.store === 'redis' &&
        stale.outcome === 'coalesced' &&
        reads.some(
          (r) =>
            r.entity === stale.entity &&
            r.version === stale.version &&
            written.some(
              (w) =>
                w.entity === stale.entity &&
                w.version > stale.version &&
                w.replica !== r.replica &&
                w.end > r.at &&
                w.end < r.returned &&
                stale.asked < r.returned,
            ),
        );
      // Every newer write of the entity completed before this answer was asked is one Redis had
      // not taken, made on the other replica: none of them could have reached this one.
      const newer = written.filter(
        (w) => w.entity === stale.entity && w.version > stale.version && w.end < stale.asked,
      );
      const undelivered = newer.length > 0 && newer.every((w) => w.unsent && w.replica !== stale.replica);
      if ((gap || joined) && stale.outcome === 'coalesced') {
        report.joinedAcross++;
        if (report.stale.length < 20) report.stale.push(`${stale.text} (joined across replicas)`);
      } else if (undelivered) report.undelivered++;
      else if (gap) {
        report.crossReplicaWindow++;
        if (report.stale.length < 20) report.stale.push(`${stale.text} (stored across replicas)`);
      } else if (report.stale.length < 20) report.stale.push(stale.text);
    }
    report.lockContended = caches.reduce((sum, cache) => sum + cache.metrics().total.lockContended, 0);
    // Apollo's reported outcomes are the ones prom-client counted.
    const counted: Record<string, number> = {};
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'herdcache_responses_total');
    for (const { labels, value } of metric?.values ?? []) {
      const outcome = String(labels.outcome);
      counted[outcome] = (counted[outcome] ?? 0) + value;
    }
    for (const outcome of new Set([...Object.keys(counted), ...Object.keys(apolloOutcomes)]))
      if ((counted[outcome] ?? 0) !== (apolloOutcomes[outcome] ?? 0))
        report.countMismatch.push(
          `${outcome}: extensions ${apolloOutcomes[outcome] ?? 0}, prom ${counted[outcome] ?? 0}`,
        );
    await new Promise<void>((resolve) => setImmediate(resolve));
  } finally {
    resume?.();
    process.off('unhandledRejection', onUnhandled);
    await apollo.stop();
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    for (const cache of new Set(caches)) await cache.close();
    for (const client of connections) client.disconnect();
  }
  return report;
}

export function responseSummary(r: ResponseStressReport): string {
  return `${r.store} seed ${r.seed}: ${r.sent} sent, ${r.answered} answered, ${r.aborted} aborted, ${r.pending.length} pending, ${r.wrong.length} wrong, ${r.leaks} leaks, ${r.stale.length} stale (${r.crossReplicaWindow} stored across replicas, ${r.joinedAcross} more joined across, ${r.undelivered} after an invalidation Redis had not taken), ${r.unhandled.length} unhandled, ${r.inFlightAfter} in flight; outcomes ${JSON.stringify(r.outcomes)} (${r.notAdmitted} misses not admitted); ${r.quietBursts} quiet bursts (${r.burstExtraExecutions.length} over one execution), ${r.burstCoalesced} coalesced in bursts, ${r.batches} Yoga batches, ${r.lockContended} lock waits, ${r.exemptWrites} writes exempt`;
}

/** Invalidations a replica's store has not taken yet (keys, tags, a clear). */
function unsentCount(cache: Cache): number {
  const { keys, tags, clear } = cache.pendingInvalidations;
  return keys + tags + (clear ? 1 : 0);
}

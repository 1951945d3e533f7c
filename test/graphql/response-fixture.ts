/** A schema for the response layer (hints from @cacheControl and @cached), its counted resolvers, and HTTP helpers. */
import { type GraphQLSchema, buildSchema, parse } from 'graphql';
import { createCache, type Cache } from '../../src/core/cache';
import type { Store } from '../../src/core/store';
import { cachedDirectiveTransformer, setResponseCacheHint } from '../../src/graphql';
import { callCounter, makeSchema } from './fixtures';

export const responseTypeDefs = `
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
  type Query {
    products: [Product!]! @cacheControl(maxAge: 60)
    user(id: ID!): User @cacheControl(maxAge: 60)
    me: User @cacheControl(maxAge: 60, scope: PRIVATE)
    slow: Int @cacheControl(maxAge: 60)
    broken: Int @cacheControl(maxAge: 60)
    fresh: Int @cacheControl(maxAge: 30)
    onlyCached: Int @cached(ttl: 60)
    dynamicPrivate: Int @cacheControl(maxAge: 60)
    viewerDynamic: String @cacheControl(maxAge: 60)
    viewerHinted: String @cacheControl(maxAge: 60)
    recommendations: String @cacheControl(maxAge: 60)
    hintedShort: Int @cacheControl(maxAge: 60)
    big(size: Int!): String @cacheControl(maxAge: 60)
    slowBig(size: Int!): String @cacheControl(maxAge: 60)
    slowBroken: Int @cacheControl(maxAge: 60)
    slowRecommendations: String @cacheControl(maxAge: 60)
    swrTick: Int @cacheControl(maxAge: 10) @cached(ttl: 10, swr: 60)
    swrTickDown: Int @cacheControl(maxAge: 10) @cached(ttl: 10, swr: 60)
    executions: Int @cacheControl(maxAge: 60)
    uncached: Int
  }
  type Mutation {
    renameUser(id: ID!, name: String!): User @invalidates(tags: ["User:{args.id}"])
    renameUserQuietly(id: ID!, name: String!): Boolean
    renameUserEntity(id: ID!, name: String!): User
  }
  type Product @cacheControl(maxAge: 120) { id: ID!, name: String! }
  type User { id: ID!, name: String! }
`;

export interface ResponseFixture {
  cache: Cache;
  calls: Record<string, number>;
  names: Map<string, string>;
  schema: ReturnType<typeof makeSchema>;
  /** While `on`, swrTickDown's backend is down (its resolver throws). */
  down: { on: boolean };
  /** Resolves the pending calls of the gated resolvers (`slow`, `slowBig`, `slowBroken`, `slowRecommendations`). */
  gate: { wait: Promise<void>; open(): void };
}

export function responseFixture(
  options: {
    store?: Store;
    cache?: Cache;
    names?: Map<string, string>;
    clock?: Parameters<typeof createCache>[0] extends infer O ? (O extends { clock?: infer C } ? C : never) : never;
  } = {},
): ResponseFixture {
  const counter = callCounter();
  const cache =
    options.cache ??
    createCache({ store: options.store, ...(options.clock !== undefined ? { clock: options.clock } : {}) });
  const names =
    options.names ??
    new Map<string, string>([
      ['1', 'Ada'],
      ['2', 'Bob'],
    ]);
  const down = { on: false };
  let open!: () => void;
  const gate = { wait: new Promise<void>((resolve) => (open = resolve)), open: () => open() };
  const user = (id: string) => (names.has(id) ? { id, name: names.get(id)! } : null);
  const schema = makeSchema(responseTypeDefs, {
    Query: {
      products: () => {
        counter.count('products');
        return [{ id: 'p1', name: 'Pen' }];
      },
      user: (_p, { id }) => {
        counter.count(`user:${id}`);
        return user(id);
      },
      me: async (_p, _a, ctx: { session?: string }) => {
        counter.count(`me:${ctx.session}`);
        await new Promise((resolve) => setTimeout(resolve, 2));
        return { id: `s-${ctx.session}`, name: `viewer ${ctx.session}` };
      },
      slow: async () => {
        counter.count('slow');
        await gate.wait;
        return 7;
      },
      broken: () => {
        counter.count('broken');
        throw new Error('broken');
      },
      fresh: () => {
        counter.count('fresh');
        return counter.calls.fresh;
      },
      dynamicPrivate: (_p, _a, _c, info) => {
        counter.count('dynamicPrivate');
        (info as unknown as { cacheControl?: { setCacheHint(h: object): void } }).cacheControl?.setCacheHint({
          scope: 'PRIVATE',
        });
        return 1;
      },
      // Declared PUBLIC, made PRIVATE by the resolver (a dynamic hint), and the viewer's own answer.
      viewerDynamic: async (_p, _a, ctx: { session?: string }, info) => {
        counter.count('viewerDynamic');
        (info as unknown as { cacheControl?: { setCacheHint(h: object): void } }).cacheControl?.setCacheHint({
          scope: 'PRIVATE',
        });
        await new Promise((resolve) => setTimeout(resolve, 2));
        return `viewer ${ctx.session}`;
      },
      // The same, through herdcache's own runtime hint (what Yoga has instead of info.cacheControl).
      viewerHinted: async (_p, _a, ctx: { session?: string }) => {
        counter.count('viewerHinted');
        setResponseCacheHint(ctx, { scope: 'PRIVATE' });
        await new Promise((resolve) => setTimeout(resolve, 2));
        return `viewer ${ctx.session}`;
      },
      // PUBLIC for anonymous viewers; a signed-in viewer's own answer, hinted PRIVATE (docs/response-cache.md).
      recommendations: (_p, _a, ctx: { session?: string }) => {
        counter.count('recommendations');
        if (ctx.session !== undefined) setResponseCacheHint(ctx, { scope: 'PRIVATE' });
        return ctx.session === undefined ? 'popular' : `picked for ${ctx.session}`;
      },
      hintedShort: (_p, _a, ctx: object) => {
        counter.count('hintedShort');
        setResponseCacheHint(ctx, { maxAge: 5 });
        return 1;
      },
      big: (_p, { size }: { size: number }) => {
        counter.count('big');
        return 'x'.repeat(size);
      },
      slowBig: async (_p, { size }: { size: number }) => {
        counter.count('slowBig');
        await gate.wait;
        return 'x'.repeat(size);
      },
      slowBroken: async () => {
        counter.count('slowBroken');
        await gate.wait;
        throw new Error('broken');
      },
      // `recommendations`, gated: a signed-in viewer's execution that anonymous requests wait on.
      slowRecommendations: async (_p, _a, ctx: { session?: string }) => {
        counter.count(`slowRecommendations:${ctx.session ?? '-'}`);
        if (ctx.session !== undefined) setResponseCacheHint(ctx, { scope: 'PRIVATE' });
        await gate.wait;
        return ctx.session === undefined ? 'popular' : `picked for ${ctx.session}`;
      },
      swrTickDown: () => {
        if (down.on) throw new Error('backend down');
        counter.count('swrTickDown');
        return counter.calls.swrTickDown;
      },
      // Counts the executions of the operations that select it.
      executions: () => {
        counter.count('executions');
        return 0;
      },
      swrTick: () => {
        counter.count('swrTick');
        return counter.calls.swrTick;
      },
      onlyCached: () => {
        counter.count('onlyCached');
        return 1;
      },
      uncached: () => {
        counter.count('uncached');
        return 1;
      },
    },
    Mutation: {
      renameUser: (_p, { id, name }) => {
        names.set(id, name);
        return user(id);
      },
      renameUserQuietly: (_p, { id, name }) => {
        names.set(id, name);
        return true;
      },
      renameUserEntity: (_p, { id, name }) => {
        names.set(id, name);
        return user(id);
      },
    },
  });
  cachedDirectiveTransformer(schema, { cache });
  return { cache, calls: counter.calls, names, schema, gate, down };
}

export interface Posted {
  status: number;
  headers: Headers;
  body: { data?: any; errors?: unknown[]; extensions?: { cache?: { response?: string; age?: number } } };
}

export async function post(
  url: string,
  query: string,
  options: { session?: string; variables?: Record<string, unknown> } = {},
): Promise<Posted> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.session !== undefined) headers['x-session'] = options.session;
  const init = { method: 'POST', headers, body: JSON.stringify({ query, variables: options.variables }) };
  const response = await fetch(url, init).catch((error: { cause?: { code?: string } }) => {
    if (error.cause?.code === 'ECONNRESET') return fetch(url, init);
    throw error;
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: JSON.parse(text) as Posted['body'] };
}

/** Waits until `check` holds, turning the event loop (bounded: fails rather than hangs). */
export async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !check(); i++) await new Promise<void>((resolve) => setTimeout(resolve, 1));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

/** The reasons a server reports when its response layer does not cache (Apollo and Yoga alike). */
export async function expectReasons(url: string): Promise<void> {
  const cacheOf = async (query: string, options?: Parameters<typeof post>[2]) =>
    (await post(url, query, options)).body.extensions?.cache;
  expect(await cacheOf('{ uncached }')).toMatchObject({ response: 'bypassed', bypassReason: 'no_cache_hint' });
  expect(await cacheOf('mutation { renameUserQuietly(id: "2", name: "B") }')).toMatchObject({
    response: 'bypassed',
    bypassReason: 'mutation',
  });
  expect(await cacheOf('{ me { id name } }')).toMatchObject({ response: 'bypassed', bypassReason: 'no_session' });
  // Variables whose encoding passes ARGS_MAX_LENGTH (declared ones; an undeclared one is no part
  // of the key: graphql-js ignores it).
  const long = { variables: { size: 1, pad: 'x'.repeat(70_000) } };
  expect(await cacheOf('query($size: Int!) { big(size: $size) }', long)).toMatchObject({ response: 'miss' });
  expect(await cacheOf('query($size: Int!, $pad: ID!) { big(size: $size) user(id: $pad) { id } }', long)).toMatchObject(
    {
      response: 'bypassed',
      bypassReason: 'unkeyable_variables',
    },
  );
  expect(await cacheOf('{ broken }')).toMatchObject({ response: 'miss', notStoredReason: 'errors' });
  expect(await cacheOf('{ viewerHinted }', { session: 'a' })).toMatchObject({
    response: 'miss',
    notStoredReason: 'stricter_hint',
  });
  // Cached: no reason.
  const stored = await cacheOf('{ products { id name } }');
  expect(stored).toMatchObject({ response: 'miss' });
  expect(stored).not.toHaveProperty('notStoredReason');
  expect(stored).not.toHaveProperty('bypassReason');
  const hit = await cacheOf('{ products { id name } }');
  expect(hit).toMatchObject({ response: 'hit' });
  expect(hit).not.toHaveProperty('bypassReason');
}

/** One operation over pages (the admission's and solo runs' tests): `page(n)` of Items, hinted `maxAge` seconds. */
export function pageSchema(maxAge = 60): GraphQLSchema {
  return buildSchema(`
    directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
    enum CacheControlScope { PUBLIC PRIVATE }
    type Query { page(n: Int!): [Item!]! @cacheControl(maxAge: ${maxAge}) }
    type Item @cacheControl(maxAge: ${maxAge}) { id: ID!, name: String }
  `);
}

/** pageSchema's operation, parsed once: one document for every request, as a server's document cache gives. */
export const PAGE = parse('query Page($n: Int!) { page(n: $n) { id name } }');

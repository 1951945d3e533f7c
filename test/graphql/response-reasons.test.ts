/**
 * Why the response layer does not cache an operation, at the engine (the plugins report these as
 * `extensions.cache.bypassReason` / `notStoredReason`: test/apollo and test/envelop response-cache).
 */
import { buildSchema, parse } from 'graphql';
import { captureWarnings } from '../helpers';
import { cachedDirectiveTypeDefs } from '../../src/graphql/sdl';
import { createCache } from '../../src/core/cache';
import {
  INCREMENTAL_RESULT,
  ResponseEngine,
  type ResponsePlan,
  type ResponseRequest,
} from '../../src/graphql/response-cache';

const schema = buildSchema(`
  directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
  directive @defer(if: Boolean, label: String) on FRAGMENT_SPREAD | INLINE_FRAGMENT
  enum CacheControlScope { PUBLIC PRIVATE }
  scalar JSON
  type Query { a: Int @cacheControl(maxAge: 60), me: Int @cacheControl(maxAge: 60, scope: PRIVATE), raw: JSON @cacheControl(maxAge: 60), none: Int, product: Product @cacheControl(maxAge: 60), results: [Result] @cacheControl(maxAge: 60) }
  type Product { id: ID!, name: String }
  type Message { text: String }
  union Result = Product | Message
  type Mutation { m: Int }
  type Subscription { s: Int }
`);

const request = (source: string, extra: Partial<ResponseRequest> = {}): ResponseRequest => ({
  schema,
  document: parse(source),
  operationName: undefined,
  variables: {},
  context: {},
  ...extra,
});

describe('response layer: bypass reasons (plan)', () => {
  const engine = new ResponseEngine(createCache(), { sessionId: (ctx: { session?: string }) => ctx.session }, 'test');

  it.each([
    ['{ none }', 'no_cache_hint'],
    ['mutation { m }', 'mutation'],
    ['subscription { s }', 'subscription'],
    ['{ ... @defer { a } }', 'incremental'],
    ['query A { a } query B { a }', 'unknown_operation'], // several operations and no name
    ['{ me }', 'no_session'],
  ])('%s: %s', (source, reason) => {
    expect(engine.plan(request(source))).toBe(reason);
  });

  it('an operation name the document does not hold: unknown_operation', () => {
    expect(engine.plan(request('query A { a }', { operationName: 'B' }))).toBe('unknown_operation');
  });

  it('variables that cannot be keyed: unkeyable_variables', () => {
    const deep: Record<string, unknown> = {};
    let at = deep;
    for (let i = 0; i < 100; i++) at = at.next = {} as Record<string, unknown>;
    const declared = 'query Q($deep: JSON, $long: String) { a }';
    expect(engine.plan(request(declared, { variables: { deep } }))).toBe('unkeyable_variables');
    expect(engine.plan(request(declared, { variables: { long: 'x'.repeat(70_000) } }))).toBe('unkeyable_variables');
  });

  it("a document's only operation is one key whether or not the request names it (Yoga passed the raw name)", () => {
    const keyOf = (source: string, operationName: string | undefined) =>
      (engine.plan(request(source, { operationName })) as ResponsePlan).key;
    const one = 'query Post($id: Int) { a }';
    expect(keyOf(one, 'Post')).toBe(keyOf(one, undefined));
    expect(keyOf('{ a }', undefined)).not.toBe(keyOf(one, undefined)); // another document
    const two = 'query A { a } query B { a }';
    expect(keyOf(two, 'A')).not.toBe(keyOf(two, 'B'));
  });

  it('variables the operation does not declare are no part of the key (graphql-js ignores them)', () => {
    const keyOf = (variables: Record<string, unknown>) =>
      (engine.plan(request('query Q($id: Int) { a }', { variables })) as ResponsePlan).key;
    const key = keyOf({ id: 1 });
    expect(keyOf({ id: 1, nonce: 'x' })).toBe(key);
    expect(keyOf({ nonce: 'y', id: 1, other: [1, 2] })).toBe(key);
    expect(keyOf(JSON.parse('{"id": 1, "__proto__": {"a": 1}}'))).toBe(key);
    expect(keyOf({ id: 2, nonce: 'x' })).not.toBe(key);
    expect(keyOf({})).not.toBe(key);
    // Unkeyable only where it is declared: an undeclared deep or long variable is dropped.
    expect(typeof engine.plan(request('{ a }', { variables: { long: 'x'.repeat(70_000) } }))).toBe('object');
    // A declared variable named like a prototype property is kept as a variable, not a prototype.
    const proto = (value: unknown) =>
      (
        engine.plan(
          request('query Q($__proto__: Int) { a }', { variables: JSON.parse(`{"__proto__": ${value}, "x": 1}`) }),
        ) as ResponsePlan
      ).key;
    expect(proto(1)).not.toBe(proto(2));
  });

  it('a cacheable operation has a plan, a PRIVATE one with a session too', () => {
    expect(typeof engine.plan(request('{ a }'))).toBe('object');
    expect(typeof engine.plan(request('{ me }', { context: { session: 's' } }))).toBe('object');
  });

  it('a closed cache: cache_unavailable (the plugin then executes)', async () => {
    const cache = createCache();
    const closing = new ResponseEngine(cache, true, 'test');
    const plan = closing.plan(request('{ a }')) as ResponsePlan;
    await cache.close();
    const lookup = await closing.lookup(plan, async () => ({ data: { a: 1 } }));
    expect(lookup).toEqual({ outcome: 'bypassed', bypassReason: 'cache_unavailable' });
  });
});

describe('response layer: not-stored reasons (complete)', () => {
  async function complete(
    source: string,
    result: Parameters<NonNullable<Awaited<ReturnType<ResponseEngine['lookup']>>['complete']>>[0],
    final?: { maxAge?: number; scope?: 'PUBLIC' | 'PRIVATE' },
  ) {
    const engine = new ResponseEngine(createCache(), true, 'test');
    const plan = engine.plan(request(source)) as ResponsePlan;
    const lookup = await engine.lookup(plan, async () => result);
    expect(lookup.outcome).toBe('miss');
    return lookup.complete!(result, final);
  }

  it('errors, or no data: errors', async () => {
    expect(await complete('{ a }', { data: { a: null }, errors: [new Error('boom')] })).toBe('errors');
    expect(await complete('{ a }', { data: null })).toBe('errors');
  });

  it('a runtime hint of PRIVATE under a PUBLIC key, or of maxAge 0: stricter_hint; a shorter maxAge: stored', async () => {
    expect(await complete('{ a }', { data: { a: 1 } }, { maxAge: 0 })).toBe('stricter_hint');
    expect(await complete('{ a }', { data: { a: 1 } }, { scope: 'PRIVATE' })).toBe('stricter_hint');
    expect(await complete('{ a }', { data: { a: 1 } }, { maxAge: 10 })).toBe('stored');
  });

  it("an entity whose id is not selected (a Federation gateway's fetch): untagged, served, not stored; with its id: stored", async () => {
    expect(await complete('{ product { name } }', { data: { product: { name: 'old' } } })).toBe('untagged');
    expect(await complete('{ product { id name } }', { data: { product: { id: '4', name: 'old' } } })).toBe('stored');
  });

  it('an id selected but left out at run time (@skip, @include(if: false), a skipped fragment): untagged, not stored', async () => {
    const left = { data: { product: { name: 'old' } } };
    expect(await complete('{ product { id @skip(if: true) name } }', left)).toBe('untagged');
    expect(await complete('{ product { ... on Product @include(if: false) { id } name } }', left)).toBe('untagged');
    expect(await complete('{ product { ...P @include(if: false) name } } fragment P on Product { id }', left)).toBe(
      'untagged',
    );
    // An object of a union without __typename, whose type may have no id (a Message): stored, its
    // Product tagged as before.
    const union = '{ results { ... on Product { id name } ... on Message { text } } }';
    expect(await complete(union, { data: { results: [{ text: 'hi' }, { id: '4', name: 'x' }] } })).toBe('stored');
    // Selected and there (or null: no entity to tag): stored.
    expect(
      await complete('{ product { id @skip(if: false) name } }', { data: { product: { id: '4', name: 'x' } } }),
    ).toBe('stored');
  });

  it('an incremental delivery: incremental', async () => {
    expect(await complete('{ a }', INCREMENTAL_RESULT)).toBe('incremental');
  });

  it('a result JSON cannot serialize: unserializable', async () => {
    expect(await complete('{ raw }', { data: { raw: { big: 1n } } })).toBe('unserializable');
  });

  it('a plain result: stored', async () => {
    expect(await complete('{ a }', { data: { a: 1 } })).toBe('stored');
  });
});

describe("response layer: a mutation's result entities", () => {
  const warnings = captureWarnings();
  const mutationSchema = buildSchema(`
    ${cachedDirectiveTypeDefs}
    type Query { user: User }
    type User { id: ID!, name: String }
    type Result { ok: Boolean }
    type Mutation { rename: User, ping: Result, renameTagged(id: ID!): User @invalidates(tags: ["User:{args.id}"]) }
  `);

  async function invalidated(source: string, data: unknown): Promise<string[]> {
    const cache = createCache();
    const spy = jest.spyOn(cache, 'invalidateTags');
    const engine = new ResponseEngine(cache, true, 'test');
    await engine.afterMutation({ ...request(source), schema: mutationSchema }, data);
    return spy.mock.calls.flatMap(([tags]) => [...tags]);
  }

  it('invalidates the entities whose id it selected', async () => {
    expect(await invalidated('mutation { rename { id name } }', { rename: { id: '1', name: 'x' } })).toEqual([
      'User:1',
    ]);
    expect(warnings).toEqual([]);
  });

  it('an entity whose id it did not select invalidates nothing, and is said once (HERDCACHE_MUTATION_UNTAGGED)', async () => {
    expect(await invalidated('mutation Rename { rename { name } }', { rename: { name: 'x' } })).toEqual([]);
    expect(warnings.map((w) => w.code)).toEqual(['HERDCACHE_MUTATION_UNTAGGED']);
    expect(warnings[0]!.message).toMatch(/the mutation Rename .*Select id/);
  });

  it('its field names the tags with @invalidates: nothing said', async () => {
    expect(await invalidated('mutation { renameTagged(id: "1") { name } }', { renameTagged: { name: 'x' } })).toEqual(
      [],
    );
    expect(warnings).toEqual([]);
  });

  it('a root fragment beside it, holding a field without @invalidates: said', async () => {
    const source = 'mutation { renameTagged(id: "1") { name } ...F } fragment F on Mutation { rename { name } }';
    await invalidated(source, { renameTagged: { name: 'x' }, rename: { name: 'y' } });
    expect(warnings.map((w) => w.code)).toEqual(['HERDCACHE_MUTATION_UNTAGGED']);
  });

  it('a result type without an id field: nothing to invalidate, nothing said', async () => {
    expect(await invalidated('mutation { ping { ok } }', { ping: { ok: true } })).toEqual([]);
    expect(warnings).toEqual([]);
  });
});

/**
 * Who receives a shared failure. Mallory, joining Alice's in-flight fill of a PUBLIC field,
 * received the error the resolver built for Alice ("report 9 refused for alice",
 * extensions.user). A failure is now handed only to callers of the leader's session; PRIVATE
 * flights never mix sessions at all.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import { type ExecutionResult, GraphQLError, execute, parse } from 'graphql';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs } from '../../src/graphql';
import { herdcacheContext } from '../../src/graphql/request';
import { deferred } from '../helpers';
import { makeSchema, run } from '../graphql/fixtures';

function reportSchema(scope: 'PUBLIC' | 'PRIVATE', withSessions = true) {
  const cache = createCache();
  const gate = deferred<void>();
  const calls: string[] = [];
  const schema = makeSchema(`type Query { report(id: Int): String @cached(ttl: 60, scope: ${scope}) }`, {
    Query: {
      report: async (_p, { id }, context: { user: string }) => {
        calls.push(context.user);
        await gate.promise;
        throw new GraphQLError(`report ${id} refused for ${context.user}`, { extensions: { user: context.user } });
      },
    },
  });
  cachedDirectiveTransformer(
    schema,
    withSessions ? { cache, sessionId: (context: { user: string }) => context.user } : { cache },
  );
  const as = (user: string) => ({ ...herdcacheContext({ cache }), user });
  return { schema, as, gate, calls };
}

const query = '{ report(id: 9) }';

it("a joiner of another session gets a generic error, never the leader's (PUBLIC)", async () => {
  const { schema, as, gate, calls } = reportSchema('PUBLIC');
  const alice = run(schema, query, as('alice'));
  const mallory = run(schema, query, as('mallory'));
  const alice2 = run(schema, query, as('alice'));
  await new Promise((r) => setImmediate(r));
  gate.resolve();
  const [a, m, a2] = await Promise.all([alice, mallory, alice2]);
  expect(calls).toEqual(['alice']); // one fill: coalescing is kept
  expect(a.errors![0]!.message).toBe('report 9 refused for alice');
  expect(a2.errors![0]!.message).toBe('report 9 refused for alice'); // same session: the error itself
  const seen = JSON.stringify(m);
  expect(seen).not.toMatch(/alice/);
  expect(m.errors![0]!.message).toMatch(
    /^herdcache: Query\.report failed in a computation that another session's request started/,
  );
  const original = m.errors![0]!.originalError as Error & { code: string; cause: Error };
  expect(original.code).toBe('E_SHARED_FAILURE');
  expect(original.cause.message).toBe('report 9 refused for alice'); // for the server's logs
  expect(Object.keys(original)).not.toContain('cause');
});

it('PRIVATE flights never join another session (each session computes its own)', async () => {
  const { schema, as, gate, calls } = reportSchema('PRIVATE');
  const runs = [run(schema, query, as('alice')), run(schema, query, as('mallory'))];
  await new Promise((r) => setImmediate(r));
  gate.resolve();
  const [a, m] = await Promise.all(runs);
  expect(calls.sort()).toEqual(['alice', 'mallory']);
  expect(a!.errors![0]!.message).toBe('report 9 refused for alice');
  expect(m!.errors![0]!.message).toBe('report 9 refused for mallory');
});

it('without a sessionId option every joiner shares the error (the documented default)', async () => {
  const { schema, as, gate, calls } = reportSchema('PUBLIC', false);
  const runs = [run(schema, query, as('alice')), run(schema, query, as('mallory'))];
  await new Promise((r) => setImmediate(r));
  gate.resolve();
  const [a, m] = await Promise.all(runs);
  expect(calls).toEqual(['alice']);
  expect(a!.errors![0]!.message).toBe('report 9 refused for alice');
  expect(m!.errors![0]!.message).toBe('report 9 refused for alice');
});

it("a Federation entity (PUBLIC): a joiner of another session gets a generic error, never the leader's", async () => {
  const cache = createCache();
  const gate = deferred<void>();
  const calls: string[] = [];
  const schema = buildSubgraphSchema({
    typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
      ${cachedDirectiveTypeDefs}
      type Product @key(fields: "id") @cached(ttl: 60) { id: ID!, name: String! }
      type Query { top: Product }`),
    resolvers: {
      Product: {
        __resolveReference: async (ref: { id: string }, context: { user: string }) => {
          calls.push(context.user);
          await gate.promise;
          throw new GraphQLError(`product ${ref.id} refused for ${context.user}`);
        },
      },
    } as never,
  });
  cachedDirectiveTransformer(schema, { cache, sessionId: (context: { user: string }) => context.user });
  const entities = parse('query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { name } } }');
  const ask = (user: string) =>
    execute({
      schema,
      document: entities,
      variableValues: { r: [{ __typename: 'Product', id: '9' }] },
      contextValue: { ...herdcacheContext({ cache }), user },
    }) as Promise<ExecutionResult>;
  const runs = [ask('alice'), ask('mallory'), ask('alice')];
  await new Promise((r) => setImmediate(r));
  gate.resolve();
  const [a, m, a2] = await Promise.all(runs);
  expect(calls).toEqual(['alice']); // one resolution: coalescing is kept
  expect(a!.errors![0]!.message).toBe('product 9 refused for alice');
  expect(a2!.errors![0]!.message).toBe('product 9 refused for alice');
  expect(JSON.stringify(m)).not.toMatch(/alice/);
  expect((m!.errors![0]!.originalError as Error & { code: string }).code).toBe('E_SHARED_FAILURE');
});

it('a PRIVATE field whose sessionId throws is bypassed (no session), never failed', async () => {
  const cache = createCache();
  let calls = 0;
  const bypassed: string[] = [];
  const schema = makeSchema(`type Query { me: String @cached(ttl: 60, scope: PRIVATE) }`, {
    Query: { me: () => `me ${++calls}` },
  });
  cachedDirectiveTransformer(schema, {
    cache,
    sessionId: () => {
      throw new Error('session store unreachable');
    },
    onBypass: (_coordinate, reason) => void bypassed.push(reason),
  });
  const result = await run(schema, '{ me }', herdcacheContext({ cache }));
  expect(result.errors).toBeUndefined();
  expect(result.data).toEqual({ me: 'me 1' });
  expect(bypassed).toEqual(['no_session']);
});

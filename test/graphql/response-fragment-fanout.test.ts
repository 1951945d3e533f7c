/**
 * A hostile query of fragments each spreading the next twice (`fragment F0 on Post { id ...F1
 * ...F1 }` …, under 1 KB) is linear for graphql-js, which collects a fragment once per selection
 * set. The response layer's two reads of the operation (its policy from static hints, and the
 * result walk that finds entities and bounds the size) followed every spread: 2^depth, seconds
 * of a blocked event loop at depth 20, on every miss and every mutation. Counted here: how often
 * each of them reads a fragment's selections, with a getter on the parsed document.
 */
import { type FragmentDefinitionNode, buildSchema, execute, parse } from 'graphql';
import { operationPolicy } from '../../src/graphql/response-policy';
import { entityTags, resultFacts } from '../../src/graphql/response-result';

const schema = buildSchema(`
  type Query { post: Post @cacheControl(maxAge: 60) }
  type Post @cacheControl(maxAge: 60) { id: ID!, t: String }
  enum CacheControlScope { PUBLIC PRIVATE }
  directive @cacheControl(maxAge: Int, scope: CacheControlScope, inheritMaxAge: Boolean) on FIELD_DEFINITION | OBJECT | INTERFACE | UNION
`);
schema.getQueryType()!.getFields().post!.resolve = () => ({ id: '1', t: 'x' });

const DEPTH = 16;

/** The fan-out document, with each fragment's selection set read through a counting getter. */
function fanOut(operation = '') {
  let fragments = '';
  for (let i = 0; i < DEPTH; i++) fragments += `fragment F${i} on Post { id t ...F${i + 1} ...F${i + 1} }\n`;
  const document = parse(`${operation}{ post { ...F0 } }\n${fragments}fragment F${DEPTH} on Post { id }`);
  let reads = 0;
  for (const definition of document.definitions) {
    if (definition.kind !== 'FragmentDefinition') continue;
    const selectionSet = definition.selectionSet;
    Object.defineProperty(definition as FragmentDefinitionNode, 'selectionSet', {
      get: () => (reads++, selectionSet),
    });
  }
  return { document, reads: () => reads, reset: () => void (reads = 0) };
}

it('the static policy reads each fragment a bounded number of times, not once per path', () => {
  const { document, reads } = fanOut();
  const policy = operationPolicy(schema, document, undefined, 0);
  expect(policy).toMatchObject({ maxAge: 60, scope: 'PUBLIC' });
  expect(reads()).toBeLessThanOrEqual(4 * (DEPTH + 1)); // was 2^(DEPTH+1) - 1: 131,071
});

it('the result walk (entities, size bound, copy) too, with the same answers', async () => {
  const { document, reads, reset } = fanOut();
  const result = await execute({ schema, document });
  expect(result.errors).toBeUndefined();
  reset();
  const facts = resultFacts(schema, document, undefined, result.data, true)!;
  expect(reads()).toBeLessThanOrEqual(4 * (DEPTH + 1));
  expect([...new Set(facts.tags)]).toEqual(['Post:1']);
  // A field selected more than once (here `id` and `t` in every fragment) makes no copy: the result is stored as is.
  if (facts.compact !== undefined) expect(JSON.stringify(facts.compact)).toBe(JSON.stringify(result.data));
  expect(facts.maxBytes).toBeGreaterThanOrEqual(JSON.stringify(result.data).length);
  reset();
  expect(entityTags(schema, document, undefined, result.data)).toEqual(['Post:1']); // a mutation's walk
  expect(reads()).toBeLessThanOrEqual(4 * (DEPTH + 1));
});

describe('the stored copy keeps the key order graphql-js gave the result (a fragment spread again)', () => {
  const typed = buildSchema(`
    type Query { node: Node, a: String, b: String }
    interface Node { id: ID!, z: String }
    type A implements Node { id: ID!, z: String, y: String }
    type B implements Node { id: ID!, z: String, x: String }
  `);
  typed.getQueryType()!.getFields().node!.resolve = () => ({ __typename: 'B', id: '1', z: 'zz', x: 'xx' });
  typed.getQueryType()!.getFields().a!.resolve = () => 'aa';
  typed.getQueryType()!.getFields().b!.resolve = () => 'bb';

  it.each([
    [
      'first spread inside a type condition the object does not meet',
      '{ node { ... on A { ...F } id ...F } } fragment F on Node { z }',
      {},
    ],
    [
      'first spread skipped by @include(if: false)',
      'query Q($on: Boolean!) { ...R @include(if: $on) a ...R } fragment R on Query { b }',
      { on: false },
    ],
  ])('%s', async (_why, source, variableValues) => {
    const document = parse(source);
    const result = await execute({ schema: typed, document, variableValues });
    expect(result.errors).toBeUndefined();
    const facts = resultFacts(typed, document, undefined, result.data, true)!;
    const stored = facts.compact === undefined ? result.data : facts.compact;
    expect(JSON.stringify(stored)).toBe(JSON.stringify(result.data));
  });
});

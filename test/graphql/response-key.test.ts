/**
 * A response key made from what is known of a one-operation document (ResponseKeys.known: its key
 * head and sorted declared variables, made once) is the key the general way makes, for any
 * variables a client can send: otherwise a replica of one version and one of the next, or two
 * requests naming the operation differently, would key one response twice (or two responses once).
 */
import { buildSchema, parse } from 'graphql';
import { ResponseKeys } from '../../src/graphql/response-key';
import type { ResponseRequest } from '../../src/graphql/response-types';

const schema = buildSchema(`
  directive @cacheControl(maxAge: Int) on FIELD_DEFINITION
  scalar JSON
  type Query { a(x: JSON): Int @cacheControl(maxAge: 60) }
`);

/** A seeded generator (mulberry32): the same cases every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ['id', 'b', 'a', 'Z', '_e', 'x1', '__proto__', 'toString', 'a_b', 'nonce'];

function valueOf(next: () => number): unknown {
  const pick = Math.floor(next() * 14);
  switch (pick) {
    case 0:
      return Math.floor(next() * 1e6);
    case 1:
      return -0;
    case 2:
      return next() * 1e300;
    case 3:
      return `s${Math.floor(next() * 100)}"\\\u2028😀`;
    case 4:
      return 'y'.repeat(1000 + Math.floor(next() * 60)); // around ARGS_INLINE_MAX
    case 5:
      return null;
    case 6:
      return undefined;
    case 7:
      return next() < 0.5;
    case 8:
      return { b: 1, a: [1, { d: 2, c: null }] };
    case 9:
      return [3, 'x', null];
    case 10:
      return Number.NaN;
    case 11:
      return 12345678901234567890n;
    case 12:
      return 'z'.repeat(70_000); // past ARGS_MAX_LENGTH: unkeyable
    default:
      return '';
  }
}

function variablesOf(next: () => number): Record<string, unknown> {
  const shape = next();
  const variables: Record<string, unknown> =
    shape < 0.1 ? Object.create(null) : shape < 0.15 ? Object.create({ id: 7, b: 'inherited' }) : {};
  const count = Math.floor(next() * 6);
  for (let i = 0; i < count; i++) {
    Object.defineProperty(variables, NAMES[Math.floor(next() * NAMES.length)]!, {
      value: valueOf(next),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return variables;
}

describe('response keys: a known operation keys as the general way does', () => {
  it('3,000 seeded variable sets over 5 documents: the same variables part and the same key', () => {
    const documents = [
      'query Q($id: Int, $b: String, $a: JSON) { a(x: $a) }',
      'query ($Z: JSON, $_e: String, $x1: Int, $id: ID) { a(x: $Z) }',
      'query P($__proto__: Int, $toString: String) { a }',
      '{ a }',
      'query R($a_b: JSON, $nonce: String, $a: Int, $b: Int, $id: Int) { a(x: $a_b) }',
    ].map((source) => parse(source));
    const keys = new ResponseKeys(0);
    const next = random(20261206);
    let compared = 0;
    let fast = 0;
    for (let i = 0; i < 3000; i++) {
      const document = documents[i % documents.length]!;
      const variables = variablesOf(next);
      const request: ResponseRequest = { schema, document, operationName: undefined, variables, context: {} };
      const known = keys.known(request)!;
      expect(known).toBeDefined();
      const declared = (known.policy as { variables: readonly string[] }).variables;
      const general = keys.variables(variables, declared, undefined);
      const viaKnown = keys.variables(variables, declared, known);
      expect(viaKnown).toBe(general);
      if (general === undefined) continue;
      expect(known.head + general).toBe(keys.key(request, null, null, general));
      compared++;
      if (!general.startsWith('#') && general !== '{}') fast++;
    }
    expect(compared).toBeGreaterThan(2000);
    expect(fast).toBeGreaterThan(800); // the fast encoding was exercised, not only its fallbacks
  });

  it('a polluted Object.prototype is no variable: read as the general way reads (own properties only)', () => {
    const keys = new ResponseKeys(0);
    const request: ResponseRequest = {
      schema,
      document: parse('query Q($nonce: String, $id: Int) { a }'),
      operationName: undefined,
      variables: { id: 1 },
      context: {},
    };
    const known = keys.known(request)!;
    Object.defineProperty(Object.prototype, 'nonce', { value: 'planted', configurable: true, writable: true });
    try {
      const declared = ['nonce', 'id'];
      expect(keys.variables(request.variables, declared, known)).toBe('{"id":1}');
      expect(keys.variables(request.variables, declared, undefined)).toBe('{"id":1}');
    } finally {
      delete (Object.prototype as Record<string, unknown>).nonce;
    }
  });

  it('a non-enumerable own variable is read as graphql-js reads it (hasOwnProperty): keyed on both ways', () => {
    const keys = new ResponseKeys(0);
    const declared = ['i', 's'];
    const variablesOf = (i: number): Record<string, unknown> => {
      const variables: Record<string, unknown> = { s: 'x' };
      Object.defineProperty(variables, 'i', { value: i, enumerable: false });
      return variables;
    };
    const one = parse('query Q($i: Int, $s: String) { a }');
    const two = parse('query Q($i: Int, $s: String) { a } query R { a }'); // the general way
    const request = (document: typeof one, i: number): ResponseRequest => ({
      schema,
      document,
      operationName: 'Q',
      variables: variablesOf(i),
      context: {},
    });
    const known = keys.known(request(one, 7))!;
    expect(keys.known(request(two, 7))).toBeUndefined();
    expect(keys.variables(variablesOf(7), declared, known)).toBe('{"i":7,"s":"x"}');
    expect(keys.variables(variablesOf(7), declared, undefined)).toBe('{"i":7,"s":"x"}');
    expect(keys.variables(variablesOf(8), declared, undefined)).toBe('{"i":8,"s":"x"}');
  });

  it('a request naming another operation than the document holds, or on another schema, is not planned as known', () => {
    const keys = new ResponseKeys(0);
    const document = parse('query Q { a }');
    const request = (extra: Partial<ResponseRequest>): ResponseRequest => ({
      schema,
      document,
      operationName: undefined,
      variables: {},
      context: {},
      ...extra,
    });
    expect(keys.known(request({ operationName: 'Q' }))?.name).toBe('Q');
    expect(keys.known(request({ operationName: 'Other' }))).toBeUndefined();
    const other = buildSchema('directive @cacheControl(maxAge: Int) on FIELD_DEFINITION type Query { a: Int }');
    const onOther = keys.known(request({ schema: other }))!;
    expect(onOther.schema).toBe(other);
    expect(onOther.head).not.toBe(keys.known(request({}))!.head); // the schema's hash is in it
    expect(keys.known({ ...request({}), document: parse('query A { a } query B { a }') })).toBeUndefined();
  });
});

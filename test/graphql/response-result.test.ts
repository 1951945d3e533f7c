/**
 * The one pass over a stored result (src/graphql/response-result): its JSON size bound is a true
 * upper bound, and the response layer serializes a result only when the bound says it may be over
 * maxBytes, so maxBytes stays exact (at the byte) without a second serialization of small results.
 */
import { buildSchema, execute, parse } from 'graphql';
import { createCache } from '../../src/core/cache';
import { ResponseEngine, type ResponsePlan } from '../../src/graphql/response-cache';
import { entityTags, resultFacts } from '../../src/graphql/response-result';
import { memoryStore } from '../../src/core/memory';
import { entrySize, valueSize } from '../../src/core/sizes';

const schema = buildSchema(`
  scalar JSON
  type Item { id: ID!, name: String, score: Float, flag: Boolean, tags: [String], extra: JSON, child: Item }
  type Query { items: [Item!]!, item: Item }
`);
const document = parse('{ items { id name score flag tags extra child { id name extra } } item { id } }');

/** A deterministic generator (xorshift), so a failure reproduces. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const ALPHABET = ['a', 'Z', '"', '\\', '\n', '\u0001', '\u001f', 'é', '€', '\ud83d\ude00', '\ud800', '\udfff', ' '];

function text(next: () => number): string {
  let out = '';
  const length = Math.floor(next() * 12);
  for (let i = 0; i < length; i++) out += ALPHABET[Math.floor(next() * ALPHABET.length)];
  return out;
}

function json(next: () => number, depth: number): unknown {
  const pick = next();
  if (depth > 3 || pick < 0.3) return text(next);
  if (pick < 0.4) return (next() - 0.5) * 10 ** Math.floor(next() * 40 - 20);
  if (pick < 0.45) return next() < 0.5 ? -0 : Number.MIN_VALUE;
  if (pick < 0.5) return next() < 0.5;
  if (pick < 0.55) return null;
  if (pick < 0.75) return Array.from({ length: Math.floor(next() * 4) }, () => json(next, depth + 1));
  const object: Record<string, unknown> = {};
  for (let i = Math.floor(next() * 4); i > 0; i--)
    object[text(next)] = next() < 0.1 ? undefined : json(next, depth + 1);
  return object;
}

function item(next: () => number, depth: number): Record<string, unknown> {
  return {
    id: String(Math.floor(next() * 100)),
    name: next() < 0.2 ? null : text(next),
    score: (next() - 0.5) * 1e6,
    flag: next() < 0.5,
    tags: Array.from({ length: Math.floor(next() * 3) }, () => text(next)),
    extra: json(next, 0),
    child: depth > 1 || next() < 0.5 ? null : item(next, depth + 1),
  };
}

it('bounds the JSON of 2,000 random results from above (unicode, escapes, lone surrogates, numbers, custom scalars)', () => {
  const next = random(2026);
  for (let i = 0; i < 2000; i++) {
    const data = { items: Array.from({ length: Math.floor(next() * 4) }, () => item(next, 0)), item: null };
    const facts = resultFacts(schema, document, undefined, data)!;
    const bytes = Buffer.byteLength(JSON.stringify(data));
    expect(facts.bounded).toBe(true);
    expect(facts.maxBytes).toBeGreaterThanOrEqual(bytes);
    // The memory store's estimate, as its own walk makes it (of the JSON: undefined keys left out).
    expect(facts.heapBytes).toBe(valueSize(JSON.parse(JSON.stringify(data))));
  }
});

it('does not bound what JSON.stringify judges by its own rules (toJSON, class instances, cycles)', () => {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  for (const extra of [new Date(0), { toJSON: () => 'x' }, new Map(), cyclic, 1n]) {
    const data = { items: [{ id: '1', extra }], item: null };
    expect(resultFacts(schema, document, undefined, data)!.bounded).toBe(false);
  }
});

describe('maxBytes through the engine', () => {
  const request = () => ({
    schema,
    document,
    operationName: undefined,
    variables: {},
    context: {},
  });
  const hinted = buildSchema(`
    scalar JSON
    type Item { id: ID!, name: String, score: Float, flag: Boolean, tags: [String], extra: JSON, child: Item }
    type Query { items: [Item!]! @cacheControl(maxAge: 60), item: Item @cacheControl(maxAge: 60) }
    directive @cacheControl(maxAge: Int) on FIELD_DEFINITION | OBJECT
  `);

  async function store(maxBytes: number, data: Record<string, unknown>) {
    const engine = new ResponseEngine(createCache(), { maxBytes, defaultMaxAge: 60 }, 'test');
    const plan = engine.plan({ ...request(), schema: hinted }) as ResponsePlan;
    const lookup = await engine.lookup(plan, async () => ({ data }));
    expect(lookup.outcome).toBe('miss');
    return lookup.complete!({ data });
  }

  it('stores a result whose JSON is exactly maxBytes, not one byte more (a bound over it is checked)', async () => {
    const data = { items: [{ id: '1', name: 'é"\n'.repeat(20) }], item: null };
    const bytes = Buffer.byteLength(JSON.stringify(data));
    expect(resultFacts(hinted, document, undefined, data)!.maxBytes).toBeGreaterThan(bytes); // the bound alone would refuse it
    expect(await store(bytes, data)).toBe('stored');
    expect(await store(bytes - 1, data)).toBe('oversized');
  });

  it('a result well under maxBytes is stored without serializing it again', async () => {
    const data = { items: [{ id: '1', name: 'a', tags: ['b'] }], item: { id: '2' } };
    const stringify = jest.spyOn(JSON, 'stringify');
    try {
      const engine = new ResponseEngine(createCache(), { defaultMaxAge: 60 }, 'test');
      const plan = engine.plan({ ...request(), schema: hinted }) as ResponsePlan;
      stringify.mockClear();
      const lookup = await engine.lookup(plan, async () => ({ data }));
      expect(await lookup.complete!({ data })).toBe('stored');
      expect(stringify.mock.calls.filter(([value]) => value === data)).toEqual([]);
    } finally {
      stringify.mockRestore();
    }
  });

  it('graphql-js results (null-prototype objects) are read by their selections: neither serialized nor walked again by the store', async () => {
    // Counts how often the result's objects are enumerated (JSON.stringify and the store's size walk do).
    let enumerated = 0;
    const counted = <T extends object>(target: T): T =>
      new Proxy(target, {
        ownKeys: (t) => {
          enumerated++;
          return Reflect.ownKeys(t);
        },
      });
    const node = (fields: Record<string, unknown>) => counted(Object.assign(Object.create(null), fields));
    const data = node({
      items: [node({ id: '1', name: 'a', child: node({ id: '2', name: 'b' }) }), node({ id: '3', name: null })],
      item: node({ id: '4' }),
    });
    const store = memoryStore();
    const engine = new ResponseEngine(createCache({ store }), { defaultMaxAge: 60 }, 'test');
    const plan = engine.plan({ ...request(), schema: hinted }) as ResponsePlan;
    const lookup = await engine.lookup(plan, async () => ({ data }));
    expect(await lookup.complete!({ data })).toBe('stored');
    expect(enumerated).toBe(0);
    // The size the store holds is the one its walk would have found.
    const plain = JSON.parse(JSON.stringify(data)) as unknown;
    enumerated = 0;
    const estimate = valueSize({ data: plain, maxAge: 60, scope: 'PUBLIC', at: 0 });
    const entry = store.getSync(plan.key)!;
    expect(entry.valueBytes).toBe(estimate);
    // …and the store counts that size, not a walk of its own.
    expect(store.calculatedSize).toBe(entrySize(plan.key, entry));
    expect(entrySize(plan.key, { ...entry, valueBytes: estimate + 1000 })).toBe(store.calculatedSize + 1000);
    const hit = await engine.lookup(plan, async () => ({ data }));
    expect(hit.outcome).toBe('hit');
    expect(valueSize(hit.response)).toBe(estimate);
  });

  it("a PRIVATE response's measured size is its walk's too (the wrapper counted by its scope)", async () => {
    const privately = buildSchema(`
      type Item { id: ID!, name: String }
      type Query { items: [Item!]! @cacheControl(maxAge: 60, scope: PRIVATE) }
      enum CacheControlScope { PUBLIC PRIVATE }
      directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
    `);
    const store = memoryStore();
    const engine = new ResponseEngine(
      createCache({ store }),
      { defaultMaxAge: 60, sessionId: () => 'viewer-1' },
      'test',
    );
    const plan = engine.plan({
      schema: privately,
      document: parse('{ items { id name } }'),
      operationName: undefined,
      variables: undefined,
      context: {},
    }) as ResponsePlan;
    expect(plan.policy.scope).toBe('PRIVATE');
    const data = { items: [{ id: '1', name: 'a' }] };
    const lookup = await engine.lookup(plan, async () => ({ data }));
    expect(await lookup.complete!({ data }, { maxAge: 60, scope: 'PRIVATE' })).toBe('stored');
    const entry = store.getSync(plan.key)!;
    expect(entry.valueBytes).toBe(valueSize({ data, maxAge: 60, scope: 'PRIVATE', at: 0 }));
  });

  it('a custom scalar with toJSON is measured by serializing it', async () => {
    const data = { items: [{ id: '1', extra: { toJSON: () => 'x'.repeat(100) } }], item: null };
    expect(await store(50, data)).toBe('oversized');
    expect(await store(200, data)).toBe('stored');
  });
});

describe('the stored copy (compact)', () => {
  const run = (source: string, variableValues?: Record<string, unknown>) => {
    const doc = parse(source);
    const rootValue = {
      items: () => [
        { id: '1', name: 'a', score: 1.5, flag: true, tags: ['x', null], extra: { b: [1, { c: null }], a: 'é' } },
        { id: 2, name: null, tags: [], extra: null, child: { id: '3', name: 'c' } },
      ],
      item: () => ({ id: '9', name: 'z', child: null }),
    };
    const { data } = execute({ schema, document: doc, rootValue, variableValues }) as { data: unknown };
    return { data, facts: resultFacts(schema, doc, undefined, data, true)! };
  };

  it('has the JSON of graphql-js results, key order included, in ordinary objects (custom scalars shared)', () => {
    for (const [source, variables] of [
      ['{ items { id name score flag tags extra child { id name } } item { id } }', undefined],
      ['{ b: item { n: name id } a: items { ...F extra } } fragment F on Item { tags id }', undefined],
      ['query($s: Boolean!) { items { id name @skip(if: $s) ... on Item { score } } }', { s: true }],
      ['query($s: Boolean!) { items { id name @include(if: $s) child { name } } }', { s: true }],
    ] as const) {
      const { data, facts } = run(source, variables);
      expect(facts.compact).not.toBe(data);
      expect(JSON.stringify(facts.compact)).toBe(JSON.stringify(data));
      const items =
        (facts.compact as { items?: Record<string, unknown>[]; a?: Record<string, unknown>[] }).items ??
        (facts.compact as { a: Record<string, unknown>[] }).a;
      expect(Object.getPrototypeOf(items[0])).toBe(Object.prototype);
      if ('extra' in items[0]!)
        expect(items[0]!.extra).toBe(
          ((data as Record<string, Record<string, unknown>[]>).items ??
            (data as Record<string, Record<string, unknown>[]>).a)![0]!.extra,
        );
    }
    // Not asked (a mutation's entities): no copy.
    expect(
      resultFacts(schema, parse('{ item { id } }'), undefined, run('{ item { id } }').data)!.compact,
    ).toBeUndefined();
  });

  it('is the same where code generation is refused (--disallow-code-generation-from-strings): keyed stores', () => {
    const source = '{ items { id name score extra child { id name } } refused: item { id name } }';
    const compiled = run(source);
    const real = globalThis.Function;
    const refuse = jest.spyOn(globalThis, 'Function').mockImplementation(() => {
      throw new EvalError('Code generation from strings disallowed for this context');
    });
    try {
      // A new document: its shapes are compiled (here: refused) on first use.
      const { data, facts } = run(`${source} `);
      expect(refuse).toHaveBeenCalled();
      expect(JSON.stringify(facts.compact)).toBe(JSON.stringify(data));
      expect(JSON.stringify(facts.compact)).toBe(JSON.stringify(compiled.facts.compact));
    } finally {
      refuse.mockRestore();
    }
    expect(globalThis.Function).toBe(real);
  });

  it('is made where a response key selected again was first selected unconditionally (Relay repeats `id` in its fragments)', () => {
    for (const source of [
      '{ items { id ... on Item { id name } } }',
      '{ items { id name ...F } } fragment F on Item { id }',
      '{ items { id child { id } ...F } } fragment F on Item { child { name } }',
    ]) {
      const { data, facts } = run(source);
      expect(facts.compact).toBeDefined();
      expect(JSON.stringify(facts.compact)).toBe(JSON.stringify(data));
    }
    // First selected under a fragment or a directive: not made (graphql-js may order it later).
    expect(run('{ items { ... on Item { name } id name } }').facts.compact).toBeUndefined();
    expect(
      run('query($s: Boolean!) { items { name @include(if: $s) id name } }', { s: false }).facts.compact,
    ).toBeUndefined();
    const nested = run(
      'query($s: Boolean!) { items { ... @include(if: $s) { child { name id } } child { id name } } }',
      { s: false },
    );
    expect(Object.keys((nested.data as { items: { child: object | null }[] }).items[1]!.child!)).toEqual([
      'id',
      'name',
    ]);
    expect(JSON.stringify(nested.facts.compact ?? nested.data)).toBe(JSON.stringify(nested.data));
  });

  it("is not made where graphql-js may order keys otherwise (a response key selected twice, `__proto__`); other executors' objects are copied as JSON reads them", () => {
    // graphql-js orders `name` after `id` here (its first occurrence is skipped): the copy would not.
    const twice = run('query($s: Boolean!) { items { name @skip(if: $s) id name } }', { s: true });
    expect(Object.keys((twice.data as { items: object[] }).items[0]!)).toEqual(['id', 'name']);
    expect(twice.facts.compact).toBeUndefined();
    expect(run('{ item { __proto__: name id } }').facts.compact).toBeUndefined();
    const plain = { items: [{ id: '1', name: 'a' }], item: null };
    const copied = resultFacts(schema, document, undefined, plain, true)!.compact as typeof plain;
    expect(copied).toEqual(plain);
    expect(copied.items[0]).not.toBe(plain.items[0]); // its own objects: a later change to plain's does not reach it
    expect(resultFacts(schema, document, undefined, plain, true)!.tags).toEqual(['Item:1']);
    // Inherited keys (JSON leaves them out) are not copied; a toJSON is JSON's to apply: no copy.
    const inherited = { items: [Object.assign(Object.create({ name: 'inherited' }), { id: '1' })], item: null };
    expect(resultFacts(schema, document, undefined, inherited, true)!.compact).toEqual({
      items: [{ id: '1' }],
      item: null,
    });
    const withToJSON = { items: [{ id: '1', name: 'a', toJSON: () => ({ id: '1' }) }], item: null };
    expect(resultFacts(schema, document, undefined, withToJSON, true)!.compact).toBeUndefined();
  });
});

describe('entity tags', () => {
  const pageSchema = () => buildSchema('type Item { id: ID!, child: Item } type Query { items: [Item!]! }');
  const page = parse('{ items { id child { id } } }');
  const node = (fields: Record<string, unknown>) => Object.assign(Object.create(null), fields) as object;

  it('lists each entity once per result, the same entity again in the next', () => {
    const s = pageSchema();
    const data = node({
      items: [node({ id: '1', child: node({ id: '2' }) }), node({ id: '2', child: node({ id: '1' }) })],
    });
    for (let i = 0; i < 2; i++) {
      const facts = resultFacts(s, page, undefined, data, true)!;
      expect(facts.tags).toEqual(['Item:1', 'Item:2']);
      expect(facts.distinct).toBe(true);
    }
  });

  it('past 2,000 ids of a type, tags are made per result and not vouched distinct', () => {
    const s = pageSchema();
    const many = node({ items: Array.from({ length: 2000 }, (_, i) => node({ id: String(i), child: null })) });
    expect(resultFacts(s, page, undefined, many, true)!.distinct).toBe(true);
    const data = node({ items: [node({ id: 'x', child: node({ id: 'x' }) })] });
    const facts = resultFacts(s, page, undefined, data, true)!;
    expect(facts.tags).toEqual(['Item:x', 'Item:x']);
    expect(facts.distinct).toBe(false);
  });
});

describe('entity tags kept per type', () => {
  it('keeps no tag of a long id (the table lives as long as the schema): made per result, not vouched distinct', () => {
    const s = buildSchema('type Item { id: ID!, child: Item } type Query { items: [Item!]! }');
    const page = parse('{ items { id child { id } } }');
    const node = (fields: Record<string, unknown>) => Object.assign(Object.create(null), fields) as object;
    const long = 'x'.repeat(129);
    const facts = resultFacts(
      s,
      page,
      undefined,
      node({ items: [node({ id: long, child: node({ id: long }) })] }),
      true,
    )!;
    expect(facts.tags).toEqual([`Item:${long}`, `Item:${long}`]);
    expect(facts.distinct).toBe(false);
    const short = 'y'.repeat(128);
    const kept = resultFacts(
      s,
      page,
      undefined,
      node({ items: [node({ id: short, child: node({ id: short }) })] }),
      true,
    )!;
    expect(kept.tags).toEqual([`Item:${short}`]);
    expect(kept.distinct).toBe(true);
  });
});

describe('entities of an abstract type without __typename (a Relay node(id))', () => {
  const relay = buildSchema(`
    interface Node { id: ID! }
    type Post implements Node { id: ID!, title: String }
    type Comment implements Node { id: ID!, text: String }
    type NotFound { reason: String }
    union Hit = Post | Comment
    union Lookup = Post | NotFound
    type Query { node(id: ID!): Node, hits: [Hit!]!, lookup: Lookup }
  `);
  relay.getQueryType()!.getFields().node!.resolve = () => ({ __typename: 'Post', id: '1', title: 't' });
  relay.getQueryType()!.getFields().hits!.resolve = () => [{ __typename: 'Comment', id: '7', text: 'c' }];
  relay.getQueryType()!.getFields().lookup!.resolve = () => ({ __typename: 'Post', id: '5', title: 't' });

  it('is tagged as each type it may be: an invalidation of its own type reaches it', async () => {
    const document = parse('{ node(id: "1") { id ... on Post { title } } hits { ... on Comment { id } } }');
    const result = await execute({ schema: relay, document });
    expect(result.errors).toBeUndefined();
    expect(entityTags(relay, document, undefined, result.data).sort()).toEqual(
      ['Comment:1', 'Comment:7', 'Post:1', 'Post:7'].sort(),
    );
    // With __typename selected, only its own type.
    const typedDocument = parse('{ node(id: "1") { __typename id } }');
    const typed = await execute({ schema: relay, document: typedDocument });
    expect(entityTags(relay, typedDocument, undefined, typed.data)).toEqual(['Post:1']);
  });

  it('as the member types that have an id only (a union of an entity and a NotFound)', async () => {
    const document = parse('{ lookup { ... on Post { id } } }');
    const result = await execute({ schema: relay, document });
    expect(entityTags(relay, document, undefined, result.data)).toEqual(['Post:5']);
  });

  it('a response key that is `id` under one type condition and an alias under another tags nothing wrong', async () => {
    const aliased = buildSchema(`
      interface Node { id: ID! }
      type Post implements Node { id: ID! }
      type Comment implements Node { id: ID!, authorId: ID! }
      type Query { node: Node }
    `);
    aliased.getQueryType()!.getFields().node!.resolve = () => ({ __typename: 'Comment', id: 'c1', authorId: 'u9' });
    const document = parse('{ node { __typename ... on Post { id } ... on Comment { id: authorId } } }');
    const result = await execute({ schema: aliased, document });
    expect(result.errors).toBeUndefined();
    expect(entityTags(aliased, document, undefined, result.data)).not.toContain('Comment:u9');
  });
});

/**
 * Hostile argument values: depth (a JSON scalar nested 5,000 deep made the @cached field fail
 * with "Maximum call stack size exceeded" while the plain field answered) and numbers JSON merges
 * (-0 and 0 shared a key: after `inv(x: 0.0)`, `inv(x: -0.0)` was served Infinity).
 */
import { GraphQLScalarType } from 'graphql';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { ARGS_MAX_DEPTH, cachedFieldKey, canonicalArgs } from '../../src/graphql/keys';
import { cacheReport, herdcacheContext } from '../../src/graphql/request';
import { makeSchema, run } from '../graphql/fixtures';

function nested(depth: number): unknown {
  let value: unknown = 'leaf';
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { a: value } : [value];
  return value;
}

function jsonSchema() {
  const cache = createCache();
  const reasons: string[] = [];
  let calls = 0;
  const schema = makeSchema('scalar JSON\ntype Query { deep(v: JSON): Int @cached(ttl: 60) }', {
    Query: {
      deep: () => ++calls,
    },
  });
  const json = schema.getType('JSON') as GraphQLScalarType;
  json.parseValue = (value) => value;
  json.serialize = (value) => value;
  cachedDirectiveTransformer(schema, { cache, onBypass: (_c, reason) => reasons.push(reason) });
  return { cache, schema, reasons, calls: () => calls };
}

describe('depth', () => {
  it('a JSON argument nested 5,000 deep is answered, uncached and counted (args_too_deep)', async () => {
    const { cache, schema, reasons, calls } = jsonSchema();
    const context = herdcacheContext({ cache });
    const result = await run(schema, 'query($v: JSON) { deep(v: $v) }', context, { v: nested(5000) });
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ deep: 1 });
    expect(reasons).toEqual(['args_too_deep']);
    expect(cacheReport(context)?.total.bypassed).toBe(1);
    expect(calls()).toBe(1);
  });

  it('nesting up to ARGS_MAX_DEPTH is keyed (and cached); one level more is not', async () => {
    expect(canonicalArgs({ v: nested(ARGS_MAX_DEPTH - 1) })).toBeDefined();
    expect(canonicalArgs({ v: nested(ARGS_MAX_DEPTH) })).toBeUndefined();
    expect(() => cachedFieldKey('Query.deep', { args: { v: nested(200_000) } })).toThrow(/nest deeper than 64 levels/);
    const { schema, reasons, calls } = jsonSchema();
    for (let i = 0; i < 2; i++)
      await run(schema, 'query($v: JSON) { deep(v: $v) }', {}, { v: nested(ARGS_MAX_DEPTH - 1) });
    expect(calls()).toBe(1);
    expect(reasons).toEqual([]);
  });

  it('a toJSON that never bottoms out is refused, not followed forever', () => {
    class Endless {
      toJSON(): unknown {
        return { next: new Endless() };
      }
    }
    expect(canonicalArgs({ v: new Endless() })).toBeUndefined();
  });
});

describe('-0 and 0', () => {
  it('are keyed apart: inv(x: -0.0) is not served the inv(x: 0.0) entry', async () => {
    const cache = createCache();
    let calls = 0;
    const schema = makeSchema('type Query { inv(x: Float): String @cached(ttl: 60) }', {
      Query: {
        inv: (_p, { x }) => {
          calls++;
          return String(1 / x);
        },
      },
    });
    cachedDirectiveTransformer(schema, { cache });
    expect((await run(schema, '{ inv(x: 0.0) }')).data).toEqual({ inv: 'Infinity' });
    expect((await run(schema, '{ inv(x: -0.0) }')).data).toEqual({ inv: '-Infinity' });
    expect((await run(schema, 'query($x: Float) { inv(x: $x) }', {}, { x: -0 })).data).toEqual({ inv: '-Infinity' });
    expect((await run(schema, '{ inv(x: 0) }')).data).toEqual({ inv: 'Infinity' });
    expect(calls).toBe(2);
    expect(canonicalArgs({ x: -0 })).toBe('{"x":-0}');
    expect(Object.is(JSON.parse(canonicalArgs({ x: -0 })!).x, -0)).toBe(true);
    expect(cachedFieldKey('Query.inv', { args: { x: -0 } })).not.toBe(cachedFieldKey('Query.inv', { args: { x: 0 } }));
  });
});

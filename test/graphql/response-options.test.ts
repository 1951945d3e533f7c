/**
 * The response layer's durations (defaultMaxAge, swr, in seconds) are bounded by what the registry
 * can keep (1e15 ms): a longer one is refused when the plugin is created, naming it and the value,
 * rather than accepted and then every request bypassed (cache_unavailable).
 */
import { buildSchema, parse } from 'graphql';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';
import { ResponseEngine } from '../../src/graphql/response-cache';

describe('responseCache durations', () => {
  it('refuses a defaultMaxAge or swr over 1e12 seconds (the registry keeps at most 1e15 ms), naming it and the value', () => {
    const cache = createCache();
    expect(() => new ResponseEngine(cache, { defaultMaxAge: 1e12 + 1 }, 'test')).toThrow(
      'option "responseCache.defaultMaxAge" must be an integer number of seconds >= 0 and at most 1e12, got 1000000000001',
    );
    expect(() => new ResponseEngine(cache, { defaultMaxAge: 1e15 }, 'test')).toThrow(
      /responseCache.defaultMaxAge.*got 1000000000000000/,
    );
    expect(() => new ResponseEngine(cache, { swr: 1e13 }, 'test')).toThrow(
      /option "responseCache.swr" must be .* at most 1e12, got 10000000000000/,
    );
    expect(() => new ResponseEngine(cache, { defaultMaxAge: 1e12, swr: 1e12 }, 'test')).not.toThrow();
    // Both plugins, when they are created.
    expect(() => herdcachePlugin({ cache, responseCache: { defaultMaxAge: 1e15 } })).toThrow(
      /responseCache.defaultMaxAge/,
    );
    expect(() => useHerdcache({ cache, responseCache: { swr: 2 ** 53 } })).toThrow(/responseCache.swr/);
  });

  it('a defaultMaxAge and swr of 1e12 are stored: a miss, then a hit', async () => {
    const cache = createCache();
    const engine = new ResponseEngine(cache, { defaultMaxAge: 1e12, swr: 1e12 }, 'test');
    const schema = buildSchema('type Query { b: Int }');
    const document = parse('{ b }');
    const plan = engine.plan({ schema, document, operationName: undefined, variables: {}, context: {} });
    if (typeof plan === 'string') throw new Error(plan);
    const first = await engine.lookup(plan, () => Promise.reject(new Error('not run apart')));
    expect(first.outcome).toBe('miss');
    expect(await first.complete!({ data: { b: 1 } })).toBe('stored');
    expect((await engine.lookup(plan, () => Promise.reject(new Error('not run apart')))).outcome).toBe('hit');
  });
});

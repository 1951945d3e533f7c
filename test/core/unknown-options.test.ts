/**
 * An option name a function does not know is refused, naming the function and the name: since
 * 0.2 no `ttl` means coalesce-only, so a misspelt `ttl` would otherwise silently disable caching.
 */
import { buildSchema } from 'graphql';
import { Registry } from 'prom-client';
import Redis from 'ioredis';
import { createCache, memoryStore, HerdcacheError } from 'herdcache';
import { redisStore, tieredStore } from 'herdcache/redis';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheContext } from 'herdcache/graphql';
import { herdcachePlugin } from 'herdcache/apollo';
import { useHerdcache } from 'herdcache/envelop';
import { herdcacheMetrics, prometheusMetrics } from 'herdcache/prometheus';
import { tracedStore, tracingHooks } from 'herdcache/otel';

function refusal(call: () => unknown): HerdcacheError {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(HerdcacheError);
    expect((error as HerdcacheError).code).toBe('E_INVALID_OPTION');
    return error as HerdcacheError;
  }
  throw new Error('not refused');
}

async function rejection(call: () => Promise<unknown>): Promise<HerdcacheError> {
  const error = await call().then(
    () => new Error('not refused'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(HerdcacheError);
  expect((error as HerdcacheError).code).toBe('E_INVALID_OPTION');
  return error as HerdcacheError;
}

const batch = (keys: readonly string[]) => keys;
const typo = { tll: 5 } as object;

describe('unknown option names are refused', () => {
  test('createCache names the key, the function, and the close known name', () => {
    const error = refusal(() => createCache({ tll: 60_000 } as object));
    expect(error.message).toContain('createCache(): unknown option "tll"');
    expect(error.message).toContain('Did you mean "ttl"?');
  });

  test('no hint when no known name is close', () => {
    expect(refusal(() => createCache({ zzzzzzzz: 1 } as object)).message).not.toContain('Did you mean');
  });

  test('getOrCompute, cache.loader, scope.getOrCompute, scope.loader, memoryStore', async () => {
    const cache = createCache();
    const error = await cache
      .getOrCompute('k', () => 1, typo)
      .then(
        () => undefined,
        (e: unknown) => e as HerdcacheError,
      );
    expect(error?.message).toContain('getOrCompute(): unknown option "tll"');
    expect(refusal(() => cache.loader({ name: 'a', batch, ...typo })).message).toContain(
      'cache.loader(): unknown option "tll"',
    );
    const scope = cache.request();
    await expect(scope.getOrCompute('k', () => 1, typo)).rejects.toThrow('scope.getOrCompute(): unknown option "tll"');
    const users = cache.loader({ name: 'users', batch });
    expect(refusal(() => scope.loader(users, { cahce: false } as object)).message).toContain('Did you mean "cache"?');
    expect(refusal(() => memoryStore({ maxx: 3 } as object)).message).toContain('memoryStore(): unknown option "maxx"');
    // Known names still pass, also with undefined values.
    await expect(cache.getOrCompute('k', () => 1, { ttl: 5, label: undefined })).resolves.toBe(1);
  });

  test('redisStore and tieredStore (checked before the client)', () => {
    expect(refusal(() => redisStore({ client: {}, prefx: 'x' } as never)).message).toContain(
      'redisStore(): unknown option "prefx"',
    );
    expect(refusal(() => tieredStore({ l2: {}, subscriber: {}, l1ttl: 5 } as never)).message).toContain(
      'Did you mean "l1Ttl"?',
    );
  });

  test('the @cached directive, the Apollo and Envelop plugins, the Prometheus metrics', async () => {
    const cache = createCache();
    const schema = buildSchema(`${cachedDirectiveTypeDefs}\ntype Query { a: Int }`);
    expect(
      refusal(() => cachedDirectiveTransformer(schema, { cache, sesionId: () => 'u' } as never)).message,
    ).toContain('Did you mean "sessionId"?');
    expect(refusal(() => herdcachePlugin({ cache, extension: true } as never)).message).toContain(
      'herdcachePlugin(): unknown option "extension"',
    );
    expect(refusal(() => useHerdcache({ cache, extension: true } as never)).message).toContain(
      'useHerdcache(): unknown option "extension"',
    );
    // One level down, named with its path, as redisStore's breaker options are.
    expect(refusal(() => herdcachePlugin({ cache, responseCache: { maxbytes: 5 } } as never)).message).toContain(
      'herdcachePlugin(): unknown option "responseCache.maxbytes".\nDid you mean "responseCache.maxBytes"?',
    );
    expect(refusal(() => useHerdcache({ cache, responseCache: { sesionId: () => 'u' } } as never)).message).toContain(
      'useHerdcache(): unknown option "responseCache.sesionId".\nDid you mean "responseCache.sessionId"?',
    );
    const registry = new Registry();
    expect((await rejection(() => herdcacheMetrics({ cache, registry, maxSource: 5 } as never))).message).toContain(
      'Did you mean "maxSources"?',
    );
    expect((await rejection(() => prometheusMetrics({ registry, maxOperationLabel: 5 } as never))).message).toContain(
      'prometheusMetrics(): unknown option "maxOperationLabel"',
    );
  });
});

describe("a load's options: a misspelt signal was dropped, so the load never aborted", () => {
  const sginal = { sginal: new AbortController().signal } as object;

  test('loader.load, loader.loadMany, a scoped load and loadMany, scope.load: refused, naming the call', async () => {
    const cache = createCache({ ttl: 1000 });
    const users = cache.loader({ name: 'users', batch });
    const scoped = cache.request().loader(users);
    const calls: [string, () => Promise<unknown>][] = [
      ['loader.load()', () => users.load('a', sginal)],
      ['loader.loadMany()', () => users.loadMany(['a', 'b'], sginal)],
      ['scopedLoader.load()', () => scoped.load('a', sginal)],
      ['scopedLoader.loadMany()', () => scoped.loadMany(['a', 'b'], sginal)],
      ['scopedLoader.load()', () => cache.request().load(users, 'a', sginal)],
    ];
    for (const [where, call] of calls) {
      const error = await rejection(call);
      expect(error.message).toContain(`${where}: unknown option "sginal"`);
      expect(error.message).toContain('Did you mean "signal"?');
    }
    expect(users.counters.batches).toBe(0);
  });

  test('an options value that is not an object is refused; known names still pass', async () => {
    const cache = createCache({ ttl: 1000 });
    const users = cache.loader({ name: 'users', batch });
    const scoped = cache.request().loader(users);
    for (const bad of [null, 5, 'signal']) {
      for (const call of [
        () => users.load('a', bad as never),
        () => users.loadMany(['a'], bad as never),
        () => scoped.load('a', bad as never),
        () => scoped.loadMany(['a'], bad as never),
      ])
        await expect(call()).rejects.toMatchObject({ code: 'E_INVALID_ARGUMENT' });
    }
    const { signal } = new AbortController();
    await expect(users.loadMany(['a'], { signal })).resolves.toEqual(['a']);
    await expect(scoped.loadMany(['b'], { signal: undefined })).resolves.toEqual(['b']);
    await expect(scoped.load('c', {})).resolves.toBe('c');
  });
});

describe('an options object is an object of its own names', () => {
  function refused(call: () => unknown, code: string, message: RegExp | string): void {
    expect(call).toThrow(expect.objectContaining({ code }));
    expect(call).toThrow(message);
  }

  test('an array is refused as "an options object", where options or a nested options object go', async () => {
    const notOptions = /argument "options" must be an options object, got array\(0\)/;
    refused(() => createCache([] as object), 'E_INVALID_ARGUMENT', notOptions);
    refused(() => createCache({ hooks: [] as object }), 'E_INVALID_OPTION', /option "hooks" must be an options object/);
    refused(() => memoryStore([] as object), 'E_INVALID_ARGUMENT', notOptions);
    refused(() => redisStore([] as never), 'E_INVALID_ARGUMENT', notOptions);
    refused(() => tieredStore([] as never), 'E_INVALID_ARGUMENT', notOptions);
    const cache = createCache();
    refused(() => cache.request([] as object), 'E_INVALID_ARGUMENT', notOptions);
    refused(() => cache.loader([] as never), 'E_INVALID_ARGUMENT', notOptions);
    refused(() => cache.observe([] as object), 'E_INVALID_OPTION', /option "hooks" must be an options object/);
    // getOrCompute: also after a call with {} (whose resolution a later call with the same values reuses).
    await cache.getOrCompute('k', () => 1, {});
    await expect(cache.getOrCompute('k', () => 1, [] as object)).rejects.toThrow(notOptions);
    await expect(cache.request().getOrCompute('k', () => 1, [] as object)).rejects.toThrow(notOptions);
  });

  test('an option inherited through the prototype is refused (it was read: Object.create({ ttl }) cached)', async () => {
    const inherited = /createCache\(\): option "ttl" is inherited through the options object's prototype/;
    refused(() => createCache(Object.create({ ttl: 5 }) as object), 'E_INVALID_OPTION', inherited);
    refused(
      () => createCache({ hooks: Object.create({ onHit: () => undefined }) as object }),
      'E_INVALID_OPTION',
      /option "hooks\.onHit" is inherited/,
    );
    refused(
      () => memoryStore(Object.create({ max: 5 }) as object),
      'E_INVALID_OPTION',
      /memoryStore\(\): option "max" is inherited/,
    );
    // An inherited unknown name is an unknown name.
    refused(() => createCache(Object.create({ tll: 5 }) as object), 'E_INVALID_OPTION', /unknown option "tll"/);
    const cache = createCache();
    const users = cache.loader({ name: 'users', batch, ttl: 1000 });
    const signal = new AbortController().signal;
    await expect(users.load('a', Object.create({ signal }) as object)).rejects.toThrow(
      /loader\.load\(\): option "signal" is inherited/,
    );
    // getOrCompute, also after a call with the same values given as own names (the reused resolution).
    await cache.getOrCompute('k', () => 1, { ttl: 5 });
    await expect(cache.getOrCompute('k', () => 1, Object.create({ ttl: 5 }) as object)).rejects.toThrow(
      /getOrCompute\(\): option "ttl" is inherited/,
    );
    // Own names of objects without Object.prototype are options as any other.
    const bare = Object.assign(Object.create(null) as object, { ttl: 5 });
    expect(() => createCache(bare)).not.toThrow();
    await expect(cache.getOrCompute('k2', () => 2, bare)).resolves.toBe(2);
  });
});

describe('the per-operation context and the OpenTelemetry helpers refuse unknown names too', () => {
  test('herdcacheContext({ loadres }) would have given a context without its loaders', () => {
    const cache = createCache();
    const user = cache.loader({ name: 'user', batch });
    const error = refusal(() => herdcacheContext({ cache, loadres: { user } } as never));
    expect(error.message).toContain('herdcacheContext(): unknown option "loadres"');
    expect(error.message).toContain('Did you mean "loaders"?');
    expect(herdcacheContext({ cache, loaders: { user } }).loaders.user).toBeDefined();
  });

  test('tracingHooks() and tracedStore()', () => {
    expect(refusal(() => tracingHooks({ tracr: undefined } as never)).message).toContain(
      'tracingHooks(): unknown option "tracr"',
    );
    expect(refusal(() => tracedStore(memoryStore(), { tracr: undefined } as never)).message).toContain(
      'tracedStore(): unknown option "tracr"',
    );
    expect(() => tracingHooks({})).not.toThrow();
  });
});

describe('nested options objects are refused when they hold an unknown name, with its path', () => {
  test('redisStore breaker: { … }', () => {
    // lazyConnect: never connects; the options are checked before anything is sent.
    const client = new Redis({ lazyConnect: true });
    try {
      const error = refusal(() => redisStore({ client, breaker: { treshold: 3 } as object }));
      expect(error.message).toContain('redisStore(): unknown option "breaker.treshold"');
      expect(error.message).toContain('Did you mean "breaker.threshold"?');
      expect(() => redisStore({ client, breaker: { threshold: 3, coolDown: 100 } })).not.toThrow();
    } finally {
      client.disconnect();
    }
  });

  test('createCache hooks: { … } and cache.observe()', () => {
    const error = refusal(() => createCache({ hooks: { onHits: () => undefined } as object }));
    expect(error.message).toContain('createCache(): unknown option "hooks.onHits"');
    expect(error.message).toContain('Did you mean "hooks.onHit"?');
    const cache = createCache({ hooks: { onHit: () => undefined } });
    expect(refusal(() => cache.observe({ onfill: () => undefined } as object)).message).toContain(
      'cache.observe(): unknown option "hooks.onfill"',
    );
  });
});

describe('null is a value, not the default (one rule for every option)', () => {
  test('herdcacheMetrics and prometheusMetrics refuse client: null (they loaded prom-client instead)', async () => {
    const cache = createCache();
    expect(
      (await rejection(() => herdcacheMetrics({ cache, registry: new Registry(), client: null } as never))).message,
    ).toMatch(/option "client" must be the prom-client module .*got null/);
    expect(
      (await rejection(() => prometheusMetrics({ registry: new Registry(), client: null } as never))).message,
    ).toMatch(/option "client" .*got null/);
  });
});

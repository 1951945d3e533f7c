/**
 * herdcache/otel with the SDK's in-memory exporter: a span per fill (source, keys, coalesced
 * callers, lock outcome) and per store call, children of the span active when the load missed;
 * nothing when no provider is registered; no span and no tracer call on a hit.
 */
import { type Tracer, context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { createCache, manualClock, memoryStore } from '../../src/core';
import { redisStore } from '../../src/redis';
import { FILL_SPAN, tracedStore, tracingHooks } from '../../src/otel';
import { LockingStore } from '../helpers/lock-store';
import { connect, randomPrefix } from '../redis/helpers';
import { deferred } from '../helpers';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  trace.disable();
  context.disable();
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
const named = (name: string) => spans().filter((span) => span.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

/** Runs `fn` inside a span named `resolver`, as an instrumented GraphQL server runs a resolver. */
function inResolverSpan<T>(fn: () => Promise<T>): { result: Promise<T>; spanId: string } {
  const span = trace.getTracer('test').startSpan('resolver');
  const result = context.with(trace.setSpan(context.active(), span), fn).finally(() => span.end());
  return { result, spanId: span.spanContext().spanId };
}

describe('tracingHooks: a span per fill', () => {
  it("one span for a stampede, child of the first caller's span, with source, keys, callers and coalesced; the backend call is its child", async () => {
    const cache = createCache({ hooks: tracingHooks() });
    const gate = deferred<void>();
    let backendParent: string | undefined;
    const fill = async () => {
      const db = trace.getTracer('test').startSpan('db');
      backendParent = (db as unknown as ReadableSpan).parentSpanContext?.spanId;
      db.end();
      await gate.promise;
      return 42;
    };
    const first = inResolverSpan(() => cache.getOrCompute('hot', fill, { label: 'Query.hot' }));
    const others = Array.from({ length: 9 }, () => cache.getOrCompute('hot', fill, { label: 'Query.hot' }));
    await new Promise((resolve) => setTimeout(resolve, 10));
    gate.resolve();
    expect(await Promise.all([first.result, ...others])).toEqual(Array(10).fill(42));
    const [span, ...more] = named(FILL_SPAN);
    expect(more).toHaveLength(0);
    expect(parentOf(span!)).toBe(first.spanId);
    expect(span!.attributes).toEqual({
      'herdcache.source': 'Query.hot',
      'herdcache.keys': 1,
      'herdcache.lock': 'none',
      'herdcache.background': false,
      'herdcache.callers': 10,
      'herdcache.coalesced': 9,
      'herdcache.failures': 0,
    });
    expect(backendParent).toBe(span!.spanContext().spanId);
  });

  it('a loader batch is one span with its key count; a failing key sets ERROR', async () => {
    const cache = createCache({ hooks: tracingHooks() });
    const users = cache.loader<string, string>({
      name: 'user',
      batch: (ids) => ids.map((id) => (id === 'bad' ? new Error('no such user') : `user ${id}`)),
    });
    const results = await Promise.allSettled(['1', '2', 'bad'].map((id) => users.load(id)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const [span] = named(FILL_SPAN);
    expect(span!.attributes).toMatchObject({
      'herdcache.source': 'user',
      'herdcache.keys': 3,
      'herdcache.failures': 1,
      'herdcache.coalesced': 0,
    });
    expect(span!.status).toEqual({ code: 2, message: '1 of 3 keys failed' });
  });

  it('lock outcomes: won, and timeout after another process held the lock past lockWaitTimeout', async () => {
    const clock = manualClock();
    const shared = new LockingStore(clock);
    const cache = createCache({ store: shared, clock, ttl: 60_000, lockWaitTimeout: 100, hooks: tracingHooks() });
    expect(await cache.getOrCompute('a', () => 1)).toBe(1);
    shared.locks.set('b', { token: 'another replica', until: clock.now() + 60_000 });
    const waiting = cache.getOrCompute('b', () => 2);
    for (let i = 0; i < 20 && named(FILL_SPAN).length < 2; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      clock.advance(50);
    }
    expect(await waiting).toBe(2);
    expect(named(FILL_SPAN).map((span) => span.attributes['herdcache.lock'])).toEqual(['won', 'timeout']);
  });

  it('a hit makes no span and calls no tracer', async () => {
    const tracer = trace.getTracer('herdcache');
    const startSpan = jest.fn(tracer.startSpan.bind(tracer));
    const counting: Tracer = { startSpan, startActiveSpan: tracer.startActiveSpan.bind(tracer) } as Tracer;
    const cache = createCache({
      store: tracedStore(memoryStore(), { tracer: counting }),
      hooks: tracingHooks({ tracer: counting }),
      ttl: 60_000,
    });
    await cache.getOrCompute('k', () => 1);
    const calls = startSpan.mock.calls.length;
    expect(calls).toBeGreaterThan(0);
    for (let i = 0; i < 100; i++) expect(await cache.getOrCompute('k', () => 2)).toBe(1);
    expect(startSpan.mock.calls.length).toBe(calls);
    expect(cache.metrics().total.hits).toBe(100);
  });

  it('records nothing when no tracer provider is registered', async () => {
    trace.disable();
    try {
      const cache = createCache({ store: tracedStore(memoryStore()), hooks: tracingHooks() });
      expect(await cache.getOrCompute('k', () => 1)).toBe(1);
      expect(await cache.loader<string, string>({ name: 'l', batch: (ids) => ids }).load('x')).toBe('x');
      expect(spans()).toEqual([]);
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });

  it('a hook that throws, or never calls the fill, does not stop the fill', async () => {
    const cache = createCache({
      hooks: {
        wrapFill: () => {
          throw new Error('broken observer');
        },
      },
    });
    expect(await cache.getOrCompute('a', () => 1)).toBe(1);
    cache.observe({ wrapFill: () => Promise.resolve(undefined as never) });
    cache.observe(tracingHooks());
    expect(await cache.getOrCompute('b', () => 2)).toBe(2);
    expect(named(FILL_SPAN)).toHaveLength(1);
  });
});

describe('tracedStore: a span per store call', () => {
  it('Redis: the read, the lock, and the fenced write, children of the resolver span; the fill under it too', async () => {
    const client = await connect();
    try {
      const store = tracedStore(redisStore({ client, prefix: randomPrefix('otel') }));
      const cache = createCache({ store, hooks: tracingHooks(), ttl: 60_000 });
      const { result, spanId } = inResolverSpan(() => cache.getOrCompute('k', () => 'v'));
      expect(await result).toBe('v');
      // The fenced write is issued as the callers are answered; its reply comes a moment later.
      for (let i = 0; i < 100 && named('herdcache.store.lock.writeAndRelease').length === 0; i++)
        await new Promise((resolve) => setTimeout(resolve, 5));
      const names = spans()
        .filter((span) => span.name !== 'resolver')
        .map((span) => span.name);
      // A cold key: one call reads it and takes its lock (the store's readOrAcquire, kept by the proxy).
      expect(names).toEqual(['herdcache.store.lock.readOrAcquire', FILL_SPAN, 'herdcache.store.lock.writeAndRelease']);
      for (const span of spans().filter((s) => s.name !== 'resolver')) expect(parentOf(span)).toBe(spanId);
      expect(named('herdcache.store.lock.readOrAcquire')[0]!.attributes).toEqual({
        'herdcache.store': 'redis',
        'herdcache.keys': 1,
      });
      // The rest of the lock is the store's own: its watch (wake-ups) and its write batching.
      expect(typeof store.lock.watch).toBe('function');
      expect(typeof store.lock.sent).toBe('function');
      expect(named(FILL_SPAN)[0]!.attributes['herdcache.lock']).toBe('won');
      // Everything else the store has is still there.
      expect(store.breakerState).toBe('closed');
      expect(store.prefix).toMatch(/^hc-test:otel:/);
      exporter.reset();
      expect(await cache.getOrCompute('k', () => 'other')).toBe('v');
      // A warm read: one call (the pipeline's read goes through readOrAcquire; the store reads a present key as MGET).
      expect(spans().map((span) => span.name)).toEqual(['herdcache.store.lock.readOrAcquire']);
    } finally {
      client.disconnect();
    }
  });

  it('a failing store call: the span says ERROR, the load computes the value', async () => {
    const failing = memoryStore();
    const store = tracedStore({
      name: 'flaky',
      getMany: () => Promise.reject(new Error('down')),
      setMany: (w) => failing.setMany(w),
      delete: (k) => failing.delete(k),
      clear: () => failing.clear(),
    });
    const cache = createCache({ store, hooks: tracingHooks(), ttl: 60_000 });
    expect(await cache.getOrCompute('k', () => 3)).toBe(3);
    const [read] = named('herdcache.store.getMany');
    expect(read!.status).toEqual({ code: 2, message: 'down' });
    expect(read!.events.map((event) => event.name)).toEqual(['exception']);
    expect(cache.metrics().total.storeErrors).toBe(1);
  });

  it('validates its arguments', () => {
    expect(() => tracedStore(null as never)).toThrow(/argument "store"/);
    expect(() => tracingHooks({ tracer: {} as never })).toThrow(/option "tracer"/);
  });
});

/**
 * OpenTelemetry spans from herdcache, printed to the console: a fill span per computation (with
 * the number of callers it served) and a span per store call, under the caller's span.
 *
 *   npx tsx examples/tracing.ts
 *
 * In an app, register your SDK (e.g. @opentelemetry/sdk-node) as usual; herdcache only uses
 * @opentelemetry/api, and records nothing when no provider is registered.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createCache, memoryStore } from 'herdcache';
import { tracedStore, tracingHooks } from 'herdcache/otel';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())] }),
);

// tracedStore matters most for a store on the network (redisStore, tieredStore); the memory store shows the shape.
const cache = createCache({ store: tracedStore(memoryStore()), hooks: tracingHooks(), ttl: 60_000 });

async function main(): Promise<void> {
  const tracer = trace.getTracer('example');
  await tracer.startActiveSpan('GET /products/42', async (request) => {
    // 20 concurrent callers, one computation: one herdcache.fill span with herdcache.callers = 20.
    const results = await Promise.all(
      Array.from({ length: 20 }, () => cache.getOrCompute('product:42', async () => ({ id: 42, name: 'Lamp' }))),
    );
    console.log(`20 callers got ${JSON.stringify(results[0])}`);
    request.end();
  });
  // A hit: no span at all.
  await cache.getOrCompute('product:42', async () => ({ id: 42, name: 'Lamp' }));
  await cache.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

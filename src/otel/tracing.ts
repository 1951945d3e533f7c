/**
 * OpenTelemetry spans through @opentelemetry/api (an optional peer; the user's SDK records them).
 *
 * - `tracingHooks()`: cache hooks that make one span per fill (one call of a fill or batch
 *   function), the active span while the fill runs, so the backend calls it makes are its
 *   children. Its parent is the span active when the first caller missed (the resolver's span,
 *   under an instrumented GraphQL server): the fill runs in that caller's async context.
 * - `tracedStore(store)`: one span per store call (read, write, lock, invalidation).
 *
 * A hit reaches neither: no hook runs on it and the synchronous read (getSync) is not wrapped.
 * With no tracer provider registered, the API's tracer makes non-recording spans: the fill then
 * runs as it would without tracing, and nothing is recorded.
 */
import { type Attributes, type Span, type Tracer, SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { invalidArgument, invalidOption } from '../core/errors';
import { checkKnownKeys, optionNames } from '../core/options';
import type { CacheHooks, FillInfo } from '../core/types';

export const TRACER_NAME = 'herdcache';

export interface TracingOptions {
  /** The tracer to use. Default: `trace.getTracer('herdcache')` from the global provider (set later is fine). */
  tracer?: Tracer;
}

/** Span names: one per kind of work, low cardinality; the details are attributes. */
export const FILL_SPAN = 'herdcache.fill';
export const STORE_SPAN_PREFIX = 'herdcache.store.';

const TRACING_OPTIONS = optionNames<TracingOptions>({ tracer: true });

/** The tracer of `where`'s options (tracingHooks(), tracedStore()), validated: unknown names refused. */
export function tracerOf(options: TracingOptions | undefined, where: string): Tracer {
  if (options !== undefined && (options === null || typeof options !== 'object'))
    throw invalidArgument('options', options, 'an object');
  if (options !== undefined) checkKnownKeys(where, options, TRACING_OPTIONS);
  const tracer = options?.tracer;
  if (tracer === undefined) return trace.getTracer(TRACER_NAME);
  if (tracer === null || typeof tracer !== 'object' || typeof tracer.startSpan !== 'function')
    throw invalidOption('tracer', tracer, 'an OpenTelemetry Tracer');
  return tracer;
}

/**
 * Hooks that trace fills: `createCache({ hooks: tracingHooks() })` or `cache.observe(tracingHooks())`.
 *
 * A fill span carries `herdcache.source`, `herdcache.keys` (how many keys the call computes),
 * `herdcache.lock` (won | timeout | failed | none), `herdcache.background`, and when it ends
 * `herdcache.callers` (callers waiting on its keys) and `herdcache.coalesced` (of them, those who
 * joined a fill already in flight), `herdcache.failures`; its status is ERROR when a key failed.
 */
export function tracingHooks(options?: TracingOptions): CacheHooks {
  const tracer = tracerOf(options, 'tracingHooks()');
  return {
    wrapFill<T>(fill: () => Promise<T>, info: FillInfo): Promise<T> {
      const span = tracer.startSpan(FILL_SPAN, {
        kind: SpanKind.INTERNAL,
        attributes: {
          'herdcache.source': info.source,
          'herdcache.keys': info.keys.length,
          'herdcache.lock': info.lock,
          'herdcache.background': info.background,
        },
      });
      if (!span.isRecording()) {
        span.end();
        return fill();
      }
      const running = context.with(trace.setSpan(context.active(), span), fill);
      running.then(
        () => endFill(span, info),
        (error: unknown) => {
          span.recordException(error instanceof Error ? error : String(error));
          endFill(span, info);
        },
      );
      return running;
    },
  };
}

function endFill(span: Span, info: FillInfo): void {
  const callers = info.callers;
  // Each key of a caller-driven fill has one first caller; a background refresh has none.
  const leaders = info.background ? 0 : info.keys.length;
  span.setAttributes({
    'herdcache.callers': callers,
    'herdcache.coalesced': Math.max(0, callers - leaders),
    'herdcache.failures': info.failures,
  });
  if (info.failures > 0)
    span.setStatus({ code: SpanStatusCode.ERROR, message: `${info.failures} of ${info.keys.length} keys failed` });
  span.end();
}

/** Runs one store call in a span named after it; a failure is recorded and rethrown as it was. */
export function tracedCall<T>(
  tracer: Tracer,
  operation: string,
  attributes: Attributes,
  call: () => Promise<T>,
): Promise<T> {
  const span = tracer.startSpan(STORE_SPAN_PREFIX + operation, { kind: SpanKind.CLIENT, attributes });
  if (!span.isRecording()) {
    span.end();
    return call();
  }
  let running: Promise<T>;
  try {
    running = context.with(trace.setSpan(context.active(), span), call);
  } catch (error) {
    failed(span, error);
    throw error;
  }
  return running.then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      failed(span, error);
      throw error;
    },
  );
}

function failed(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.end();
}

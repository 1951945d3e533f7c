/**
 * The per-operation report every server plugin makes (Apollo's herdcachePlugin, Envelop/Yoga's
 * useHerdcache): one implementation, so the two servers report exactly alike.
 *
 * An operation begins when the server is about to execute it: its context gets the operation's
 * cache state (the request scope the @cached directive and the helpers use), made here when the
 * app's context function did not call herdcacheContext(). It ends when the result leaves: the
 * state is released, and what the operation's loads did is recorded in the metrics (when a
 * recorder is given) and returned for `extensions.cache` (when enabled).
 *
 * The metrics recorder is injected (the plugins pass herdcache/prometheus's): this layer names no
 * peer and depends on nothing above it.
 */
import type { Cache } from '../core/cache';
import { HerdcacheError, invalidOption } from '../core/errors';
import { checkBoolean, checkKnownKeys } from '../core/options';
import { type CacheReport, type OperationCache, attachOperation, checkCache, detachOperation } from './request';

/** Where operations' reports go besides the response (herdcache/prometheus's HerdcacheMetrics). */
/**
 * A prom-client `Registry`, as far as the plugins' option types name one: structural, so that the
 * types of herdcache/apollo and herdcache/envelop compile without prom-client installed (it is
 * needed only for metrics). A real Registry is checked when the plugin is made.
 */
export interface MetricsRegistry {
  getSingleMetric(name: string): unknown;
  registerMetric(metric: never): void;
}

export interface OperationRecorder {
  recordOperation(operationName: string | null | undefined, report: CacheReport): void;
  /** One operation's response-cache outcome (herdcache_responses_total). */
  recordResponse?(operationName: string | null | undefined, outcome: string): void;
  /** Starts feeding the cache's own events (fill durations); returns the function that stops it. */
  observe(cache: Cache): () => void;
}

export interface OperationReportingOptions {
  cache: Cache;
  /** `extensions.cache` on every response; default: on outside production (NODE_ENV read at creation). */
  extensions?: boolean;
  /** Loads the recorder once (prom-client is imported on demand); undefined: no metrics. */
  recorder?: () => Promise<OperationRecorder>;
  /** The public function's name, for error messages ("herdcachePlugin", "useHerdcache"). */
  owner: string;
}

/** One operation between begin() and end(). */
export interface ActiveOperation {
  readonly operation: OperationCache;
  readonly context: object;
  readonly created: boolean;
}

export class OperationReporting {
  readonly cache: Cache;
  /** Whether end() returns the report for the response's `extensions.cache`. */
  readonly extensions: boolean;
  readonly #owner: string;
  readonly #loadRecorder: (() => Promise<OperationRecorder>) | undefined;
  #recorder: OperationRecorder | undefined;
  #starting: Promise<() => void> | undefined;
  #recordFailed = false;

  constructor(options: OperationReportingOptions) {
    const { cache, owner } = options;
    checkCache(cache);
    this.cache = cache;
    this.#owner = owner;
    this.extensions =
      options.extensions === undefined
        ? process.env.NODE_ENV !== 'production'
        : checkBoolean('extensions', options.extensions);
    this.#loadRecorder = options.recorder;
  }

  /**
   * Loads the recorder and starts observing the cache (once, however often called). Resolves with
   * the function that stops observing. A server with a start hook calls it there; one without
   * calls it at creation, and operations ending before it resolved are recorded when it does.
   */
  start(): Promise<() => void> {
    if (this.#starting !== undefined) return this.#starting;
    const load = this.#loadRecorder;
    if (load === undefined) return (this.#starting = Promise.resolve(() => {}));
    this.#starting = load().then((recorder) => {
      this.#recorder = recorder;
      return recorder.observe(this.cache);
    });
    return this.#starting;
  }

  /**
   * The operation's cache state in `context`, attached when missing. Undefined when the context
   * cannot carry it (frozen, not an object): the operation then runs without a report.
   */
  begin(context: unknown): ActiveOperation | undefined {
    const attached = attachOperation(context, this.cache);
    if (attached === undefined) return undefined;
    const { operation, created } = attached;
    if (operation.cache !== this.cache) {
      detachOperation(context, operation, created);
      throw new HerdcacheError(
        'E_INVALID_OPTION',
        `herdcache: the context was made by herdcacheContext() with another cache than ${this.#owner}({ cache })`,
      );
    }
    return { operation, context: context as object, created };
  }

  /** Counts a response-cache outcome, once the recorder is there (as end() does). */
  recordResponse(operationName: string | null | undefined, outcome: string): void {
    const recorder = this.#recorder;
    if (recorder !== undefined) this.#record(() => recorder.recordResponse?.(operationName, outcome));
    else if (this.#starting !== undefined && this.#loadRecorder !== undefined) {
      void this.#starting.then(
        () => this.#record(() => this.#recorder?.recordResponse?.(operationName, outcome)),
        () => {},
      );
    }
  }

  /** Metrics never fail an operation: a recorder that throws (a metric changed under it) is warned of once. */
  #record(record: () => void): void {
    try {
      record();
    } catch (error) {
      if (this.#recordFailed) return;
      this.#recordFailed = true;
      process.emitWarning(
        `herdcache: recording metrics failed (${error instanceof Error ? error.message : String(error)}); the operations are answered, their counts are lost`,
        { code: 'HERDCACHE_METRICS_FAILED' },
      );
    }
  }

  /**
   * The operation ended. Releases its state (a context reused by the next operation must not keep
   * this one's memo); when it executed (`executed`: parsed and valid), records its report and
   * returns it if `extensions` is on.
   */
  end(active: ActiveOperation, operationName: string | null | undefined, executed: boolean): CacheReport | undefined {
    detachOperation(active.context, active.operation, active.created);
    // Nobody to read it (no metrics, no extensions): not made (a snapshot per source, per operation).
    if (!executed || (this.#loadRecorder === undefined && !this.extensions)) return undefined;
    const report = active.operation.report();
    const recorder = this.#recorder;
    if (recorder !== undefined) this.#record(() => recorder.recordOperation(operationName, report));
    else if (this.#starting !== undefined && this.#loadRecorder !== undefined) {
      // The recorder is still loading (the first operations after creation): record when it is there.
      void this.#starting.then(
        () => this.#record(() => this.#recorder?.recordOperation(operationName, report)),
        () => {},
      );
    }
    return this.extensions ? report : undefined;
  }
}

export function checkPluginOptions(options: unknown, owner: string, known: ReadonlySet<string>): void {
  if (options === null || typeof options !== 'object')
    throw invalidOption('options', options, `an object with a "cache" (${owner})`);
  checkKnownKeys(`${owner}()`, options, known);
}

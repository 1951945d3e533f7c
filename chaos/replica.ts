/**
 * One replica of the chaos fleet: a Node process with its own ioredis client and its own registry,
 * as one pod of a deployment would be. Forked by chaos/fleet.ts (run with tsx) and reused from one
 * scenario to the next: each `prepare` builds a fresh client and cache, each report tears them down.
 *
 * It counts what the runner cannot see from outside: every load's outcome and latency, every fill
 * (per key, with its start time: the runner adds them up fleet-wide), every store error the cache
 * reported. A failed load is one that rejected or answered a value made for another key.
 */
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import type { Cache } from '../src/core';
import { PACKAGE_ENV } from './packed';
import type { ChaosValue, FromReplica, LoadPlan, LoadReport, ToReplica } from './protocol';

/**
 * The library under test: this checkout's sources, or (chaos --packed) the package installed from
 * the tarball, resolved from the directory the runner names.
 */
const packageDir = process.env[PACKAGE_ENV];
/* eslint-disable @typescript-eslint/no-require-imports -- which module to load is decided at run time */
const { createCache } = (
  packageDir === undefined ? require('../src/core') : require(require.resolve('herdcache', { paths: [packageDir] }))
) as typeof import('../src/core');
const { redisStore } = (
  packageDir === undefined
    ? require('../src/redis')
    : require(require.resolve('herdcache/redis', { paths: [packageDir] }))
) as typeof import('../src/redis');
/* eslint-enable @typescript-eslint/no-require-imports */

const MAX_FAILURES_KEPT = 5;

function send(message: FromReplica): void {
  process.send!(message);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Burns the CPU: the event loop runs nothing else meanwhile (a heavy request, a GC pause). */
function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

/**
 * The client a user writes from the README's Redis example: ioredis's defaults but for
 * `retryStrategy`, which the README recommends (reconnect within 100 ms of Redis answering again;
 * ioredis's own backs off to 2 s, and until the client is ready the fleet fills without the lock).
 * Keep it the README's, or the recovery figures are not what a user gets.
 */
const RETRY_STRATEGY = (times: number): number => Math.min(times * 50, 100);

function newClient(plan: LoadPlan): Redis {
  const connection = plan.connection;
  // --ioredis-defaults (run.ts): ioredis's own strategy, what a user who skips the option gets.
  const ownStrategy = process.env.HERDCACHE_CHAOS_IOREDIS_DEFAULTS === '1';
  const options = ownStrategy
    ? { lazyConnect: plan.connectFirst }
    : { lazyConnect: plan.connectFirst, retryStrategy: RETRY_STRATEGY };
  return 'url' in connection
    ? new Redis(connection.url, options)
    : new Redis({ sentinels: [...connection.sentinels], name: connection.name, ...options });
}

class Run {
  readonly #plan: LoadPlan;
  #client: Redis | undefined;
  #cache: Cache | undefined;
  #loads = 0;
  #failed = 0;
  readonly #failures: string[] = [];
  #maxLatency = 0;
  readonly #fills = new Map<string, number[]>();
  readonly #unlockedFills: number[] = [];
  readonly #readyTimes: number[] = [];
  readonly #reconnects: [number, number][] = [];
  readonly #storeErrorTimes: number[] = [];
  readonly #storeErrorCodes: Record<string, number> = {};
  #blocks = 0;
  #lastBlock = 0;

  constructor(plan: LoadPlan) {
    this.#plan = plan;
  }

  async prepare(): Promise<void> {
    if (!this.#plan.connectFirst) return;
    this.#start();
    await this.#client!.connect();
  }

  async go(): Promise<LoadReport> {
    const plan = this.#plan;
    if (!plan.connectFirst) this.#start();
    const end = Date.now() + plan.durationMs;
    const work: Promise<void>[] = [];
    for (let i = 0; i < plan.burst; i++) work.push(this.#load());
    for (let i = 0; i < plan.concurrency; i++) work.push(this.#loop(end));
    if (plan.invalidateEveryMs > 0) work.push(this.#invalidations(end));
    await Promise.all(work);
    const report: LoadReport = {
      pid: process.pid,
      loads: this.#loads,
      failed: this.#failed,
      failures: this.#failures,
      maxLatencyMs: Math.round(this.#maxLatency),
      fills: Object.fromEntries(this.#fills),
      unlockedFills: this.#unlockedFills,
      readyTimes: this.#readyTimes,
      reconnects: this.#reconnects,
      storeErrorTimes: this.#storeErrorTimes,
      storeErrorCodes: this.#storeErrorCodes,
      blocks: this.#blocks,
      lockTimeouts: this.#cache!.metrics().total.lockTimeouts,
    };
    await this.#cache!.close();
    this.#client!.disconnect();
    return report;
  }

  /** Abandons the run (the runner gave up on it): nothing may keep this process busy. */
  stop(): void {
    this.#client?.disconnect();
  }

  #start(): void {
    const plan = this.#plan;
    const client = newClient(plan);
    // A client's own errors are logged by ioredis when nobody listens; the cache reports its own.
    client.on('error', () => {});
    client.on('ready', () => this.#readyTimes.push(Date.now()));
    client.on('reconnecting', (delay: number) => this.#reconnects.push([Date.now(), delay]));
    this.#client = client;
    const store = redisStore({ client, prefix: plan.prefix });
    if (plan.blockLoopMs > 0) this.#blockAfterLockCalls(client);
    this.#cache = createCache({
      store,
      ttl: 60_000,
      ...plan.cache,
      hooks: {
        wrapFill: (fill, info) => {
          if (info.lock !== 'won') for (let i = 0; i < info.keys.length; i++) this.#unlockedFills.push(Date.now());
          return fill();
        },
        onStoreError: (error) => {
          this.#storeErrorTimes.push(Date.now());
          const code = (error as { code?: string }).code ?? 'uncoded';
          this.#storeErrorCodes[code] = (this.#storeErrorCodes[code] ?? 0) + 1;
        },
      },
    });
  }

  /**
   * The worst moment for a busy loop: the lock script has been written to the socket and Redis
   * answers in well under a millisecond, but the answer is not read until the loop is free again.
   * The store sends it through the command redisStore defined on the client, so wrapping that
   * command is enough; the call itself goes out unchanged (ioredis writes it to the socket at once).
   */
  #blockAfterLockCalls(client: Redis): void {
    const commands = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const acquire = commands.herdcacheLockAcquire3;
    if (typeof acquire !== 'function')
      throw new Error('redisStore no longer defines herdcacheLockAcquire3: update chaos/replica.ts');
    const plan = this.#plan;
    commands.herdcacheLockAcquire3 = (...args: unknown[]) => {
      const pending = acquire.apply(client, args);
      const now = Date.now();
      if (now - this.#lastBlock >= plan.blockEveryMs) {
        this.#lastBlock = now;
        this.#blocks++;
        // After the caller's synchronous step (the store arms its timeout right after this call
        // returns) and before the loop polls the socket: as a CPU-heavy request queued behind would.
        queueMicrotask(() => blockLoop(plan.blockLoopMs));
      }
      return pending;
    };
  }

  #pickKey(): string {
    const plan = this.#plan;
    if (plan.fixedKeys !== undefined) return plan.fixedKeys[Math.floor(Math.random() * plan.fixedKeys.length)]!;
    let epoch = Math.floor(Date.now() / plan.epochMs);
    if (plan.revisitShare > 0 && Math.random() < plan.revisitShare)
      epoch -= 1 + Math.floor(Math.random() * plan.revisitEpochs);
    return `e${epoch}:${Math.floor(Math.random() * plan.keysPerEpoch)}`;
  }

  async #loop(end: number): Promise<void> {
    while (Date.now() < end) {
      await this.#load();
      await sleep(this.#plan.thinkMs);
    }
  }

  async #load(): Promise<void> {
    const plan = this.#plan;
    const key = this.#pickKey();
    const started = performance.now();
    this.#loads++;
    try {
      const fill = async (): Promise<ChaosValue> => {
        let starts = this.#fills.get(key);
        if (starts === undefined) this.#fills.set(key, (starts = []));
        starts.push(Date.now());
        await sleep(plan.fillMs);
        return { key, by: process.pid, pad: 'x'.repeat(plan.valueBytes) };
      };
      const value = await this.#cache!.getOrCompute(key, fill, plan.tagged ? { tags: [`tag:${key}`] } : undefined);
      if (value?.key !== key) this.#fail(`load of ${key} answered ${JSON.stringify(value).slice(0, 80)}`);
    } catch (error) {
      this.#fail(`load of ${key} rejected: ${error instanceof Error ? error.message : String(error)}`);
    }
    const latency = performance.now() - started;
    if (latency > this.#maxLatency) this.#maxLatency = latency;
  }

  /** invalidateTags never fails its caller either, whatever sits at the version key (a failure, not a load). */
  async #invalidations(end: number): Promise<void> {
    while (Date.now() < end) {
      await sleep(this.#plan.invalidateEveryMs);
      const key = this.#pickKey();
      try {
        await this.#cache!.invalidateTags([`tag:${key}`]);
      } catch (error) {
        this.#fail(`invalidateTags of tag:${key} rejected: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }

  #fail(message: string): void {
    this.#failed++;
    if (this.#failures.length < MAX_FAILURES_KEPT) this.#failures.push(message);
  }
}

let current: Run | undefined;

process.on('message', (message: ToReplica) => {
  const reply = async (): Promise<void> => {
    if (message.type === 'exit') {
      current?.stop();
      process.exit(0);
    } else if (message.type === 'prepare') {
      current?.stop();
      current = new Run(message.plan);
      await current.prepare();
      send({ type: 'prepared' });
    } else if (message.type === 'go') {
      const report = await current!.go();
      current = undefined;
      send({ type: 'report', report });
    }
  };
  reply().catch((error: unknown) =>
    send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});

// The runner is gone (crashed, killed): so is this replica.
process.on('disconnect', () => process.exit(1));

send({ type: 'ready' });

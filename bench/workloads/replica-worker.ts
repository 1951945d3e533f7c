/**
 * One replica of workload 2, run as a child process by replicas.ts. It connects to the shared
 * Redis; for each trial it builds one system and warms it (`prepare`), then on `go` waits for the
 * agreed start instant, fires its burst of loads of the cold key, and reports fills and latencies.
 */
import { SlowDb } from '../lib/db';
import {
  asyncCacheDedupe,
  bentocache,
  dataloaderPerRequest,
  dataloaderShared,
  herdcache,
  noCache,
  type Contender,
} from '../lib/peers';
import { connect, loadRedisStore } from '../lib/redis';
import type { SystemId } from '../lib/report';
import { burst, sleep } from '../lib/stats';

export interface WorkerTask {
  readonly system: SystemId;
  readonly prefix: string;
  readonly loads: number;
  readonly fillMs: number;
}

/** Parent → worker: build and warm a system, then (every replica ready) fire at `at`. */
export type WorkerMessage =
  { readonly type: 'prepare'; readonly task: WorkerTask } | { readonly type: 'go'; readonly at: number };

export interface WorkerReport {
  readonly fills: number;
  readonly latencies: number[];
  readonly label: string;
  /** Epoch ms (sub-ms, comparable across processes): when this replica's last fill returned, 0 if none. */
  readonly fillEndedAt: number;
  /** Epoch ms: when the last of this replica's loads was answered. */
  readonly lastAnsweredAt: number;
}

/** Warm-up bursts per trial, before the measured one (see prepare). */
const WARM_ROUNDS = 5;
/** Warm-up bursts on keys shared by the replicas, after those (see prepare). */
const SHARED_WARM_ROUNDS = 3;

/** Wall-clock epoch milliseconds with performance.now()'s resolution, comparable across processes. */
function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/** The SlowDb, noting when a fill returns (it writes to the cache right after). */
class TimedDb extends SlowDb {
  fillEndedAt = 0;

  override async get(id: string) {
    const value = await super.get(id);
    this.fillEndedAt = epochNow();
    return value;
  }

  override async getMany(ids: readonly string[]) {
    const values = await super.getMany(ids);
    this.fillEndedAt = epochNow();
    return values;
  }

  override reset(): void {
    super.reset();
    this.fillEndedAt = 0;
  }
}

async function main(): Promise<void> {
  const url = process.env.HERDCACHE_BENCH_REDIS;
  if (!url) throw new Error('replica-worker: HERDCACHE_BENCH_REDIS is not set');
  const client = await connect(url);
  const factory = loadRedisStore();

  const build = (task: WorkerTask, db: SlowDb): Contender => {
    const shared = { client, prefix: task.prefix };
    switch (task.system) {
      case 'noCache':
        return noCache(db);
      case 'dataloaderPerRequest':
        return dataloaderPerRequest(db);
      case 'dataloaderShared':
        return dataloaderShared(db);
      case 'asyncCacheDedupe':
        return asyncCacheDedupe(db, {}, shared);
      case 'bentocache':
        return bentocache(db, {}, { l1: true, l2: shared });
      case 'herdcache':
        if (typeof factory === 'string') throw new Error(factory);
        // As the README's first example: redisStore({ client }). The store opens its own subscriber
        // (fill-lock waiters are woken over pub/sub) on its first locked fill, here the warm-up's.
        return herdcache(db, { store: factory(shared) });
      default:
        throw new Error(`replica-worker: no system ${task.system}`);
    }
  };

  let prepared: { task: WorkerTask; db: TimedDb; contender: Contender } | undefined;
  const handle = async (message: WorkerMessage): Promise<void> => {
    if (message.type === 'prepare') {
      const { task } = message;
      const db = new TimedDb(task.fillMs);
      const contender = build(task, db);
      // Warm this process's code paths on keys of its own (not shared with the other replicas), so
      // the synchronized burst measures steady state, not JIT compilation or lazy connects: a burst
      // of cold loads per round, as many as the measured one, each round on a new key (a cached key
      // would warm the hit path only). V8 optimizes a path after some thousands of runs: after one
      // round of 200 loads, herdcache's burst of 1,000 took 4-10 ms to issue (scoped loads still
      // interpreted), after 5 rounds of 1,000 0.3-0.7 ms (a long-running server's steady state).
      for (let round = 0; round < WARM_ROUNDS; round++) {
        await burst(task.loads, () => contender.request()(`warm-${process.pid}-${round}`));
      }
      // Then rounds on cold keys shared by the replicas (the same names in every process), fired as
      // each replica gets there: the measured burst's other paths run too (a replica waiting on
      // another's fill lock and woken by its write, a read of a value another replica just wrote),
      // which no key of its own reaches. Without them the first trial measured those paths cold
      // (first-use compilation): in 4 runs of row 2 the first trial's wake was the slowest of its
      // three every time (6.3-27 ms on a loaded 2-core machine); with them, in 1 run of 4.
      for (let round = 0; round < SHARED_WARM_ROUNDS; round++) {
        await burst(task.loads, () => contender.request()(`warm-shared-${round}`));
      }
      db.reset();
      prepared = { task, db, contender };
      process.send!('ready');
      return;
    }
    const { task, db, contender } = prepared!;
    prepared = undefined;
    await sleep(Math.max(0, message.at - Date.now()));
    const latencies = await burst(task.loads, () => contender.request()('hot'));
    const lastAnsweredAt = epochNow();
    await contender.close();
    const report: WorkerReport = {
      fills: db.rows,
      latencies,
      label: contender.label,
      fillEndedAt: db.fillEndedAt,
      lastAnsweredAt,
    };
    process.send!(report);
  };
  process.on('message', (message: WorkerMessage) => {
    handle(message).catch((error: unknown) => {
      console.error('replica-worker:', error);
      process.exit(1);
    });
  });
  process.on('disconnect', () => {
    client.disconnect();
  });
  process.send!('ready');
}

void main().catch((error: unknown) => {
  console.error('replica-worker:', error);
  process.exit(1);
});

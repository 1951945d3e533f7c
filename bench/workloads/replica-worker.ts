/**
 * One replica of workload 2, run as a child process by replicas.ts. It connects to the shared
 * Redis, then for each message builds one system, waits for the agreed start instant, fires its
 * burst of loads of the cold key, and reports its fills and latencies.
 */
import { SlowDb } from '../lib/db';
import { asyncCacheDedupe, bentocache, dataloaderPerRequest, dataloaderShared, herdcache, noCache, type Contender } from '../lib/peers';
import { connect, loadRedisStore } from '../lib/redis';
import type { SystemId } from '../lib/report';
import { burst, sleep } from '../lib/stats';

export interface WorkerTask {
  readonly system: SystemId;
  readonly prefix: string;
  readonly loads: number;
  readonly fillMs: number;
  /** Epoch ms at which every replica starts its burst. */
  readonly at: number;
}

export interface WorkerReport {
  readonly fills: number;
  readonly latencies: number[];
  readonly label: string;
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
        return herdcache(db, { store: factory(shared) });
      default:
        throw new Error(`replica-worker: no system ${task.system}`);
    }
  };

  process.on('message', (task: WorkerTask) => {
    void (async () => {
      const db = new SlowDb(task.fillMs);
      const contender = build(task, db);
      await sleep(Math.max(0, task.at - Date.now()));
      const latencies = await burst(task.loads, () => contender.request()('hot'));
      await contender.close();
      const report: WorkerReport = { fills: db.rows, latencies, label: contender.label };
      process.send!(report);
    })().catch((error: unknown) => {
      console.error('replica-worker:', error);
      process.exit(1);
    });
  });
  process.on('disconnect', () => client.disconnect());
  process.send!('ready');
}

void main().catch((error: unknown) => {
  console.error('replica-worker:', error);
  process.exit(1);
});

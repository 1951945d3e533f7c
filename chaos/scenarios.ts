/**
 * The chaos scenarios: each starts its own redis-server(s), runs a steady load from the fleet,
 * does one bad thing to it while the load runs, and returns the figures (figures.ts).
 *
 * The replicas use the library's defaults (commandTimeout 250 ms, breaker 5 failures / 250 ms growing to 5 s,
 * lockTtl 10 s, lockWaitTimeout 5 s) unless a scenario says otherwise: the figures are what a user
 * who changed nothing would see.
 */
import type Redis from 'ioredis';
import type { RedisServer } from '../test/setup/redis-server';
import { figures, type FaultWindow, type Figures } from './figures';
import { runLoad, type Replica } from './fleet';
import { admin, redisServer, sentinelGroup, sleep, until } from './processes';
import type { Connection, LoadPlan, LoadReport } from './protocol';

export interface ScenarioContext {
  readonly quick: boolean;
  /** Every replica forked; a scenario uses the first `replicas` of them. */
  readonly fleet: readonly Replica[];
}

export interface Outcome {
  readonly figures: Figures;
  readonly notes: readonly string[];
  /**
   * Why locks left behind are the fault's own doing and not herdcache's, when they are: the run
   * flags them instead of failing. Each must still expire (the scenario checks that).
   */
  readonly locksExplained?: string;
  /** Anything else the scenario saw go wrong that is not a failed load (flagged). */
  readonly flags?: readonly string[];
}

export interface Scenario {
  readonly name: string;
  /** Replicas the scenario needs (the fleet is forked with the largest). */
  readonly replicas: number;
  run(context: ScenarioContext): Promise<Outcome>;
}

/** How long the load runs: the full run is three times the quick one. */
function duration(context: ScenarioContext, quickMs: number): number {
  return context.quick ? quickMs : 3 * quickMs;
}

/** The load every scenario starts from (garbage.ts too); a scenario overrides what it is about. */
export function plan(
  connection: Connection,
  prefix: string,
  durationMs: number,
  overrides: Partial<LoadPlan> = {},
): LoadPlan {
  return {
    connection,
    prefix,
    connectFirst: true,
    durationMs,
    concurrency: 8,
    thinkMs: 5,
    epochMs: 250,
    keysPerEpoch: 8,
    revisitShare: 0,
    revisitEpochs: 0,
    burst: 0,
    fillMs: 30,
    valueBytes: 64,
    tagged: false,
    invalidateEveryMs: 0,
    blockLoopMs: 0,
    blockEveryMs: 0,
    cache: {},
    ...overrides,
  };
}

const url = (server: RedisServer): Connection => ({ url: server.url });

/** Lock keys under `prefix` (our tokens: strings), except those the scenario planted itself. */
async function lockKeys(client: Redis, prefix: string, planted: ReadonlySet<string> = new Set()): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) if (key.endsWith(':lock') && !planted.has(key)) found.push(key);
  } while (cursor !== '0');
  return found;
}

/**
 * Locks still there once every replica has finished and the fleet had `SETTLE_MS` to release:
 * nobody is filling anything, so each one is a lock left behind, which every replica's next miss
 * on its key would wait on (up to lockWaitTimeout) until it expires.
 */
const SETTLE_MS = 500;

async function locksLeft(port: number, prefix: string, planted?: ReadonlySet<string>): Promise<number> {
  await sleep(SETTLE_MS);
  const client = await admin(port);
  try {
    return (await lockKeys(client, prefix, planted)).length;
  } finally {
    client.disconnect();
  }
}

async function withServer<T>(
  options: Parameters<typeof redisServer>[0],
  work: (server: RedisServer) => Promise<T>,
): Promise<T> {
  const server = await redisServer(options);
  try {
    return await work(server);
  } finally {
    await server.stop('SIGKILL');
  }
}

function reachableOnly(reports: LoadReport[], startedAt: number, fillMs: number, locks: number): Figures {
  return figures({ reports, startedAt, fillMs, locksLeft: locks });
}

const startupBurst: Scenario = {
  name: 'startup burst',
  replicas: 3,
  run: (context) =>
    withServer({}, async (server) => {
      // Created at `go` and loaded at once: the client is still connecting when the traffic arrives.
      const p = plan(url(server), 'chaos:startup:', duration(context, 1500), { connectFirst: false, burst: 150 });
      const { reports, startedAt } = await runLoad(context.fleet.slice(0, 3), [p], async () => {});
      return {
        figures: reachableOnly(reports, startedAt, p.fillMs, await locksLeft(server.port, p.prefix)),
        notes: ['3 replicas, each fires 150 loads before its client is ready'],
      };
    }),
};

const blockedLoop: Scenario = {
  name: 'blocked loop',
  replicas: 3,
  run: (context) =>
    withServer({}, async (server) => {
      const p = plan(url(server), 'chaos:blocked:', duration(context, 2500));
      // Replica 0 burns 400 ms of CPU right after writing a lock call (at most every 600 ms).
      const blocked = { ...p, blockLoopMs: 400, blockEveryMs: 600 };
      const { reports, startedAt } = await runLoad(context.fleet.slice(0, 3), [blocked, p, p], async () => {});
      return {
        figures: reachableOnly(reports, startedAt, p.fillMs, await locksLeft(server.port, p.prefix)),
        notes: [`replica 0 blocked its loop 400 ms after a lock call ${reports[0]!.blocks} times`],
      };
    }),
};

const redisPaused: Scenario = {
  name: 'redis paused',
  replicas: 3,
  run: (context) =>
    withServer({}, async (server) => {
      // Long enough to see the breaker close again and loads run on a healthy Redis.
      // Keys are read again for a second after their epoch: a lock the stall left behind would
      // make those reads wait (lockWaitTimeout) and show as latency.
      const p = plan(url(server), 'chaos:paused:', duration(context, 8000), { revisitShare: 0.3, revisitEpochs: 4 });
      const { reports, startedAt, fault } = await runLoad(
        context.fleet.slice(0, 3),
        [p],
        async (startedAt): Promise<FaultWindow> => {
          const client = await admin(server.port);
          try {
            await sleep(startedAt + 1500 - Date.now());
            const from = Date.now();
            await client.call('DEBUG', 'SLEEP', '2');
            return { from, to: Date.now() };
          } finally {
            client.disconnect();
          }
        },
      );
      const locks = await locksLeft(server.port, p.prefix);
      return {
        figures: figures({ reports, startedAt, fillMs: p.fillMs, window: fault, locksLeft: locks }),
        notes: ['DEBUG SLEEP 2 at +1.5 s'],
      };
    }),
};

/** Kills Redis at +1.5 s and restarts it (empty: no persistence) on the same port after `downMs`. */
async function killAndRestart(
  server: RedisServer,
  startedAt: number,
  downMs: number,
  beforeKill: () => Promise<void>,
): Promise<{ window: FaultWindow; server: RedisServer }> {
  await sleep(startedAt + 1500 - Date.now());
  await beforeKill();
  const from = Date.now();
  await server.stop('SIGKILL');
  await sleep(downMs);
  const restarted = await redisServer({ port: server.port });
  return { window: { from, to: Date.now() }, server: restarted };
}

const redisRestarted: Scenario = {
  name: 'redis killed+restarted',
  replicas: 3,
  run: async (context) => {
    let server = await redisServer();
    try {
      const p = plan(url(server), 'chaos:killed:', duration(context, 6000));
      const { reports, startedAt, fault } = await runLoad(context.fleet.slice(0, 3), [p], async (startedAt) => {
        const { window, server: restarted } = await killAndRestart(server, startedAt, 1000, async () => {});
        server = restarted;
        return window;
      });
      const locks = await locksLeft(server.port, p.prefix);
      return {
        figures: figures({ reports, startedAt, fillMs: p.fillMs, window: fault, locksLeft: locks }),
        notes: ['SIGKILL at +1.5 s, restarted empty 1 s later'],
      };
    } finally {
      await server.stop('SIGKILL');
    }
  },
};

const restartedEmptyUnderLock: Scenario = {
  name: 'restarted empty, lock held',
  replicas: 3,
  run: async (context) => {
    let server = await redisServer();
    try {
      // Slow fills: at any moment some replica holds a lock, and the restart takes it away.
      const p = plan(url(server), 'chaos:emptied:', duration(context, 4000), { fillMs: 600, epochMs: 700 });
      let heldAtRestart = 0;
      const { reports, startedAt, fault } = await runLoad(context.fleet.slice(0, 3), [p], async (startedAt) => {
        const { window, server: restarted } = await killAndRestart(server, startedAt, 0, async () => {
          const client = await admin(server.port);
          try {
            await until(
              'a fill lock to be held',
              5000,
              async () => (heldAtRestart = (await lockKeys(client, p.prefix)).length) > 0,
            );
          } finally {
            client.disconnect();
          }
        });
        server = restarted;
        return window;
      });
      const locks = await locksLeft(server.port, p.prefix);
      return {
        figures: figures({ reports, startedAt, fillMs: p.fillMs, window: fault, locksLeft: locks }),
        notes: [`SIGKILL + immediate restart while ${heldAtRestart} fill lock(s) were held`],
      };
    } finally {
      await server.stop('SIGKILL');
    }
  },
};

const eviction: Scenario = {
  name: 'maxmemory eviction',
  replicas: 3,
  run: (context) =>
    withServer(
      { extraArgs: ['--maxmemory', '4mb', '--maxmemory-policy', 'allkeys-lru', '--notify-keyspace-events', 'Ee'] },
      async (server) => {
        // 20 kB values, 80 new keys a second: several times maxmemory over the run.
        const p = plan(url(server), 'chaos:evicted:', duration(context, 2500), {
          valueBytes: 20_000,
          epochMs: 100,
          keysPerEpoch: 8,
        });
        // Which keys Redis evicted, as it says (keyspace events): a key whose value was evicted is
        // filled again by design. An evicted lock is not excused: it shows as a second fill.
        const events = await admin(server.port);
        const evictedValues = new Set<string>();
        let evictedLocks = 0;
        events.on('message', (_channel: string, key: string) => {
          if (key.endsWith(':lock')) evictedLocks++;
          else if (key.startsWith(p.prefix)) evictedValues.add(key.slice(p.prefix.length + 1, -1));
        });
        await events.subscribe('__keyevent@0__:evicted');
        try {
          const { reports, startedAt } = await runLoad(context.fleet.slice(0, 3), [p], async () => {});
          const locks = await locksLeft(server.port, p.prefix);
          if (evictedValues.size === 0)
            throw new Error('maxmemory eviction: Redis evicted nothing, the scenario did not happen');
          return {
            figures: figures({ reports, startedAt, fillMs: p.fillMs, unreachable: evictedValues, locksLeft: locks }),
            notes: [
              `maxmemory 4mb allkeys-lru, 20 kB values: ${evictedValues.size} values and ${evictedLocks} locks evicted (keys with an evicted value count as in the fault)`,
            ],
          };
        } finally {
          events.disconnect();
        }
      },
    ),
};

const MASTER_NAME = 'mymaster';

const sentinelFailover: Scenario = {
  name: 'sentinel failover',
  replicas: 2,
  run: async (context) => {
    const { replica, watcher, sentinelAdmin, stop } = await sentinelGroup(MASTER_NAME);
    try {
      const connection: Connection = { sentinels: [{ host: '127.0.0.1', port: watcher.port }], name: MASTER_NAME };
      // Keys are read again for a second after their epoch, as hot keys are: what a lock or a value
      // lost in the switch costs shows up as waits and extra fills.
      const p = plan(connection, 'chaos:failover:', duration(context, 7000), { revisitShare: 0.3, revisitEpochs: 20 });
      const { reports, startedAt, fault } = await runLoad(
        context.fleet.slice(0, 2),
        [p],
        async (startedAt): Promise<FaultWindow> => {
          await sleep(startedAt + 2000 - Date.now());
          const from = Date.now();
          await sentinelAdmin.call('SENTINEL', 'FAILOVER', MASTER_NAME);
          await until('the sentinel to name the new master', 15_000, async () => {
            const [, port] = (await sentinelAdmin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as string[];
            return Number(port) === replica.port;
          });
          return { from, to: Date.now() };
        },
      );
      await sleep(SETTLE_MS);
      const newMaster = await admin(replica.port);
      const left = await lockKeys(newMaster, p.prefix);
      const ttls = await Promise.all(left.map((key) => newMaster.pttl(key)));
      newMaster.disconnect();
      const forever = ttls.filter((ttl) => ttl === -1).length;
      if (forever > 0) throw new Error(`${forever} lock(s) without expiry on the new master`);
      const f = figures({ reports, startedAt, fillMs: p.fillMs, window: fault, locksLeft: left.length });
      const extra = f.faultKeys === 0 ? 0 : (f.faultFills - f.faultKeys) / f.faultKeys;
      return {
        figures: f,
        notes: [
          `2 replicas via 1 sentinel; failover at +2 s; ${f.faultFills - f.faultKeys} extra fills over ${f.faultKeys} keys in the failover (${extra.toFixed(2)}/key)`,
        ],
        // Replication is asynchronous: a lock taken on the old master reached the replica, its
        // release (with the value) was written to the old master after the replica was promoted
        // and is lost with it. Such a lock lives until lockTtl on the new master.
        locksExplained:
          left.length === 0
            ? undefined
            : `${left.length} lock(s) whose release the old master took after the promotion (lost with it); they expire within lockTtl`,
      };
    } finally {
      await stop();
    }
  },
};

export const SCENARIOS: readonly Scenario[] = [
  startupBurst,
  blockedLoop,
  redisPaused,
  redisRestarted,
  restartedEmptyUnderLock,
  eviction,
  sentinelFailover,
];

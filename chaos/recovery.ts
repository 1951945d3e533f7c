/**
 * Recovery: how fast the fill lock protects Redis again once it answers. Two replicas load 20 hot
 * keys with a 200 ms ttl, steadily (each key refilled about every ttl + fill, by one replica: the
 * steady fill rate), Redis fails mid-run and comes back. The figure is the fleet's fill rate in the
 * first second after Redis answers again, relative to the steady rate before the fault: 1× is
 * "the lock is back at once"; without the lock every load of an expired key fills.
 *
 * "Redis answers again": the DEBUG SLEEP returned (stall), the restarted server accepts
 * connections (kill + empty restart), the sentinel names the new master (failover), the name the
 * replicas connect to points at the promoted replica (name moved: a managed Redis's DNS failover). Flagged above
 * TARGET; a failed load fails the run as everywhere else.
 */
import { figures, type FaultWindow } from './figures';
import { runLoad } from './fleet';
import { admin, redisServer, sentinelGroup, sleep, until } from './processes';
import { switchingProxy } from '../test/setup/switching-proxy';
import type { Connection, LoadPlan, LoadReport } from './protocol';
import { plan, type Outcome, type Scenario, type ScenarioContext } from './scenarios';

const KEYS = Array.from({ length: 20 }, (_, i) => `hot${i}`);
/** Fill rate in the first second after Redis answers, relative to steady: the target. */
const TARGET = 1.5;

function recoveryPlan(connection: Connection, prefix: string, durationMs: number): LoadPlan {
  return plan(connection, prefix, durationMs, { fixedKeys: KEYS, fillMs: 30, cache: { ttl: 200 } });
}

/** When the fault starts, counted from the start of the load: the steady rate is measured before. */
function faultAt(context: ScenarioContext): number {
  return context.quick ? 2500 : 5000;
}

/** Fills per key per second, fleet-wide, of fills started in [from, to). */
function rate(reports: readonly LoadReport[], from: number, to: number): number {
  let fills = 0;
  for (const report of reports)
    for (const starts of Object.values(report.fills))
      for (const start of starts) if (start >= from && start < to) fills++;
  return fills / KEYS.length / ((to - from) / 1000);
}

/**
 * Where the first second's fills come from, per 100 ms after Redis answered: all fills / those
 * made without the lock; and when each replica's client was ready again (relative to Redis
 * answering) with the reconnect delay it was waiting out. Fills without the lock after Redis
 * answered are what a slow reconnection costs.
 */
function firstSecond(reports: readonly LoadReport[], fault: FaultWindow): string {
  const all = new Array<number>(10).fill(0);
  const unlocked = new Array<number>(10).fill(0);
  const count = (into: number[], time: number): void => {
    const bucket = Math.floor((time - fault.to) / 100);
    if (bucket >= 0 && bucket < into.length) into[bucket]!++;
  };
  for (const report of reports) {
    for (const starts of Object.values(report.fills)) for (const start of starts) count(all, start);
    for (const start of report.unlockedFills) count(unlocked, start);
  }
  const ready = reports.map((report) => {
    const at = report.readyTimes.find((time) => time > fault.from);
    const waited = report.reconnects.filter(([time]) => time > fault.from && (at === undefined || time < at)).pop();
    return `${at === undefined ? 'not reconnected' : `${at - fault.to >= 0 ? '+' : ''}${at - fault.to} ms`}${waited === undefined ? '' : ` (after a ${waited[1]} ms reconnect delay)`}`;
  });
  return `per 100 ms after Redis answered, fills / without the lock: ${all.map((n, i) => `${n}/${unlocked[i]}`).join(' ')}; clients ready again (relative to Redis answering): ${ready.join(', ')}`;
}

function outcome(
  reports: LoadReport[],
  startedAt: number,
  fault: FaultWindow,
  locksLeft: number,
  note: string,
): Outcome {
  const steady = rate(reports, startedAt + 500, fault.from);
  const first = rate(reports, fault.to, fault.to + 1000);
  const second = rate(reports, fault.to + 1000, fault.to + 2000);
  const ratio = steady === 0 ? Infinity : first / steady;
  const f = figures({ reports, startedAt, fillMs: 30, window: fault, unreachable: new Set(KEYS), locksLeft });
  const flags: string[] = [];
  if (ratio > TARGET)
    flags.push(`fill rate ${ratio.toFixed(2)}x steady in the first second after Redis answered (target <= ${TARGET}x)`);
  // A wait that reached lockWaitTimeout here is a wait on a lock whose holder was done (its release lost).
  if (f.lockTimeouts > 0) flags.push(`${f.lockTimeouts} loads waited lockWaitTimeout on a lock`);
  return {
    figures: f,
    notes: [
      note,
      firstSecond(reports, fault),
      `steady ${steady.toFixed(2)} fills/key/s; first 1 s after Redis answered ${first.toFixed(2)} (${ratio.toFixed(2)}x), next 1 s ${second.toFixed(2)} (${(steady === 0 ? Infinity : second / steady).toFixed(2)}x)`,
    ],
    flags: flags.length > 0 ? flags : undefined,
  };
}

const stall: Scenario = {
  name: 'recovery: stall',
  replicas: 2,
  run: async (context) => {
    const server = await redisServer();
    try {
      const p = recoveryPlan({ url: server.url }, 'chaos:rec-stall:', faultAt(context) + 2000 + 4000);
      const { reports, startedAt, fault } = await runLoad(
        context.fleet.slice(0, 2),
        [p],
        async (startedAt): Promise<FaultWindow> => {
          const client = await admin(server.port);
          try {
            await sleep(startedAt + faultAt(context) - Date.now());
            const from = Date.now();
            await client.call('DEBUG', 'SLEEP', '2');
            return { from, to: Date.now() };
          } finally {
            client.disconnect();
          }
        },
      );
      return outcome(
        reports,
        startedAt,
        fault,
        await locksLeft(server.port, p.prefix),
        'DEBUG SLEEP 2; 2 replicas, 20 keys, ttl 200 ms',
      );
    } finally {
      await server.stop('SIGKILL');
    }
  },
};

const restart: Scenario = {
  name: 'recovery: killed+restarted',
  replicas: 2,
  run: async (context) => {
    let server = await redisServer();
    try {
      const p = recoveryPlan({ url: server.url }, 'chaos:rec-restart:', faultAt(context) + 1000 + 5000);
      const { reports, startedAt, fault } = await runLoad(
        context.fleet.slice(0, 2),
        [p],
        async (startedAt): Promise<FaultWindow> => {
          await sleep(startedAt + faultAt(context) - Date.now());
          const from = Date.now();
          await server.stop('SIGKILL');
          await sleep(1000);
          server = await redisServer({ port: server.port });
          return { from, to: Date.now() };
        },
      );
      return outcome(
        reports,
        startedAt,
        fault,
        await locksLeft(server.port, p.prefix),
        'SIGKILL, restarted empty 1 s later; 2 replicas, 20 keys, ttl 200 ms',
      );
    } finally {
      await server.stop('SIGKILL');
    }
  },
};

const MASTER_NAME = 'recovery';

const failover: Scenario = {
  name: 'recovery: sentinel (kill)',
  replicas: 2,
  run: async (context) => {
    const { master, replica, watcher, sentinelAdmin, stop } = await sentinelGroup(MASTER_NAME);
    try {
      const connection: Connection = { sentinels: [{ host: '127.0.0.1', port: watcher.port }], name: MASTER_NAME };
      // The master dies: the sentinel sees it down (down-after 1 s), promotes the replica, and the
      // clients, reconnecting through the sentinel, find it. Releases sent meanwhile were not sent
      // (client not connected): the locks they were for reached the replica and are still there.
      const p = recoveryPlan(connection, 'chaos:rec-failover:', faultAt(context) + 9000);
      const { reports, startedAt, fault } = await runLoad(
        context.fleet.slice(0, 2),
        [p],
        async (startedAt): Promise<FaultWindow> => {
          await sleep(startedAt + faultAt(context) - Date.now());
          const from = Date.now();
          await master.stop('SIGKILL');
          await until('the sentinel to name the new master', 15_000, async () => {
            const [, port] = (await sentinelAdmin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as string[];
            return Number(port) === replica.port;
          });
          return { from, to: Date.now() };
        },
      );
      return outcome(
        reports,
        startedAt,
        fault,
        await locksLeft(replica.port, p.prefix),
        `master SIGKILLed at +${(faultAt(context) / 1000).toFixed(1)} s, the replica promoted ("Redis answered") ${((fault.to - fault.from) / 1000).toFixed(1)} s later; 2 replicas via 1 sentinel, 20 keys, ttl 200 ms`,
      );
    } finally {
      await stop();
    }
  },
};

/** The replicas connect through a proxy playing a DNS name, so a failover can move the name and not the connections. */
const nameMoved: Scenario = {
  name: 'recovery: name moved',
  replicas: 2,
  run: async (context) => {
    // No diskless-sync delay (5 s): the replica syncs at once, before the load and after the failover.
    const fast = ['--repl-diskless-sync-delay', '0'];
    const old = await redisServer({ extraArgs: fast });
    const promoted = await redisServer({ extraArgs: [...fast, '--replicaof', '127.0.0.1', String(old.port)] });
    const proxy = await switchingProxy(old.port);
    try {
      const promotedAdmin = await admin(promoted.port);
      const oldAdmin = await admin(old.port);
      try {
        await until('the replica to sync', 10_000, async () =>
          (await promotedAdmin.info('replication')).includes('master_link_status:up'),
        );
        const p = recoveryPlan({ url: `redis://127.0.0.1:${proxy.port}` }, 'chaos:rec-moved:', faultAt(context) + 6000);
        // A managed failover: the replica promoted, the old master demoted, the name moved to the
        // new one. The connections already open stay on the old master, which refuses every write
        // (READONLY) and answers reads: without a reconnection the lock is out of reach for good.
        const { reports, startedAt, fault } = await runLoad(
          context.fleet.slice(0, 2),
          [p],
          async (startedAt): Promise<FaultWindow> => {
            await sleep(startedAt + faultAt(context) - Date.now());
            const from = Date.now();
            await promotedAdmin.call('REPLICAOF', 'NO', 'ONE');
            await oldAdmin.call('REPLICAOF', '127.0.0.1', String(promoted.port));
            proxy.target = promoted.port;
            return { from, to: Date.now() };
          },
        );
        return outcome(
          reports,
          startedAt,
          fault,
          await locksLeft(promoted.port, p.prefix),
          `replica promoted, master demoted (REPLICAOF), the name (a proxy) moved at +${(faultAt(context) / 1000).toFixed(1)} s, open connections left on the old master; 2 replicas, 20 keys, ttl 200 ms`,
        );
      } finally {
        promotedAdmin.disconnect();
        oldAdmin.disconnect();
      }
    } finally {
      await proxy.close();
      await promoted.stop('SIGKILL');
      await old.stop('SIGKILL');
    }
  },
};

/** Lock keys left under `prefix` once the fleet is idle (the load ended, 500 ms to release). */
async function locksLeft(port: number, prefix: string): Promise<number> {
  await sleep(500);
  const client = await admin(port);
  try {
    let left = 0;
    for (const key of KEYS) left += await client.exists(`${prefix}{${key}}:lock`);
    return left;
  } finally {
    client.disconnect();
  }
}

export const RECOVERY_SCENARIOS: readonly Scenario[] = [stall, restart, failover, nameMoved];

/**
 * Garbage and wrong types where herdcache keeps its keys: something else wrote under our prefix (a
 * broken deploy, another program, a hand-typed command). A value key, a lock key or a tag's version
 * key holds a string that is not ours or a key of another type. Loads must not fail; a bad value
 * reads as a miss and is overwritten by the next fill.
 */
import type Redis from 'ioredis';
import type { RedisServer } from '../test/setup/redis-server';
import { figures } from './figures';
import { runLoad } from './fleet';
import { admin, redisServer, sleep } from './processes';
import type { LoadPlan } from './protocol';
import { plan, type Outcome, type Scenario, type ScenarioContext } from './scenarios';

const KEYS = Array.from({ length: 24 }, (_, i) => `g${i}`);
/** Garbage at a lock key is taken over at once: a load behind it pays no wait (ms beyond its fill). */
const LOCK_GARBAGE_MAX_MS = 100;

interface Plant {
  put(client: Redis, key: string): Promise<unknown>;
}

/** One bad thing per key, in turn: strings that are not a herdcache payload, then other types. */
const PLANTS: readonly Plant[] = [
  { put: (c, k) => c.set(k, 'not json at all') },
  { put: (c, k) => c.set(k, '{"v":99,"f":null,"s":null,"d":1}') },
  { put: (c, k) => c.set(k, '') },
  { put: (c, k) => c.set(k, Buffer.from([0xff, 0xfe, 0x00, 0x80])) },
  { put: (c, k) => c.rpush(k, 'a', 'b') },
  { put: (c, k) => c.hset(k, 'f', 'v') },
  { put: (c, k) => c.zadd(k, 1, 'm') },
  { put: (c, k) => c.sadd(k, 'm') },
];
const plantOf = (index: number): Plant => PLANTS[index % PLANTS.length]!;

function garbagePlan(
  server: RedisServer,
  prefix: string,
  context: ScenarioContext,
  overrides: Partial<LoadPlan>,
): LoadPlan {
  return plan({ url: server.url }, prefix, context.quick ? 1500 : 4500, {
    epochMs: 1000,
    keysPerEpoch: 1,
    fixedKeys: KEYS,
    ...overrides,
  });
}

async function plantAll(port: number, keyOf: (key: string) => string): Promise<Set<string>> {
  const client = await admin(port);
  try {
    const planted = new Set<string>();
    for (let i = 0; i < KEYS.length; i++) {
      const key = keyOf(KEYS[i]!);
      await plantOf(i).put(client, key);
      planted.add(key);
    }
    return planted;
  } finally {
    client.disconnect();
  }
}

async function countLocks(port: number, prefix: string, planted: ReadonlySet<string>): Promise<number> {
  await sleep(500);
  const client = await admin(port);
  try {
    let left = 0;
    for (const key of KEYS) {
      const lock = `${prefix}{${key}}:lock`;
      if (!planted.has(lock) && (await client.exists(lock)) === 1) left++;
    }
    return left;
  } finally {
    client.disconnect();
  }
}

function garbageScenario(name: string, where: 'value' | 'lock' | 'tag', note: string): Scenario {
  return {
    name,
    replicas: 3,
    async run(context): Promise<Outcome> {
      const server = await redisServer();
      try {
        const prefix = `chaos:garbage-${where}:`;
        const keyOf = (key: string) =>
          where === 'value'
            ? `${prefix}{${key}}`
            : where === 'lock'
              ? `${prefix}{${key}}:lock`
              : `${prefix}tag:{tag:${key}}`;
        const planted = await plantAll(server.port, keyOf);
        const p = garbagePlan(server, prefix, context, where === 'tag' ? { tagged: true, invalidateEveryMs: 100 } : {});
        const { reports, startedAt } = await runLoad(context.fleet.slice(0, 3), [p], async () => {});
        const locks = await countLocks(server.port, prefix, planted);
        // Not held to one fill, by construction: with tags, every key is invalidated several times
        // a second (a refill after each is the point); garbage at a version key is replaced by the
        // first read of it (a version of ours, as a bump makes one). Garbage at a lock key has no
        // expiry, so it is nobody's lock: the first acquire takes it over, and the key is held to
        // one fill like any other, its loads answered without waiting.
        const unreachable = where === 'tag' ? new Set(KEYS) : undefined;
        const f = figures({ reports, startedAt, fillMs: p.fillMs, unreachable, locksLeft: locks });
        // Here a store error can only be an invalidateTags that failed: an invalidation lost.
        const lost = where === 'tag' ? (f.storeErrors.E_STORE_ERROR ?? 0) : 0;
        const flags: string[] = [];
        if (lost > 0) flags.push(`${lost} invalidateTags calls failed: invalidations lost`);
        if (where === 'lock' && f.maxAddedLatencyMs >= LOCK_GARBAGE_MAX_MS)
          flags.push(
            `a load behind garbage at its lock key took ${f.maxAddedLatencyMs} ms beyond its fill (target < ${LOCK_GARBAGE_MAX_MS} ms)`,
          );
        return { figures: f, notes: [note], flags: flags.length > 0 ? flags : undefined };
      } finally {
        await server.stop('SIGKILL');
      }
    },
  };
}

export const GARBAGE_SCENARIOS: readonly Scenario[] = [
  garbageScenario(
    'garbage at value keys',
    'value',
    '24 keys: non-JSON, other format version, empty, binary, list, hash, zset, set',
  ),
  garbageScenario(
    'garbage at lock keys',
    'lock',
    '24 lock keys: foreign strings without expiry, binary, list, hash, zset, set',
  ),
  garbageScenario(
    'garbage at tag keys',
    'tag',
    '24 tag version keys: non-integers, list, hash, zset, set (replaced by the next invalidateTags); invalidateTags every 100 ms',
  ),
];

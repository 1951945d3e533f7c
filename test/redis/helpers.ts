/**
 * Shared by the Redis tests: real connections to real servers, never a mock.
 */
import { randomBytes } from 'node:crypto';
import Redis, { type RedisOptions } from 'ioredis';
import type { Entry } from '../../src/core/freshness';
import type { StoreReporter } from '../../src/core/store';
import type { Codec } from '../../src/redis/codec';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';

/** The server started by the jest global setup. */
export function redisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL is not set: the jest global setup starts redis-server');
  return url;
}

/** A prefix no other test file uses, so files can share one server and run in parallel. */
export function randomPrefix(label: string): string {
  return `hc-test:${label}:${randomBytes(4).toString('hex')}:`;
}

/** A connected client; `quit` it (or `disconnect`) in afterAll. */
export async function connect(url: string = redisUrl(), options: RedisOptions = {}): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, ...options });
  await client.connect();
  return client;
}

/**
 * A redis-server of the calling test file's own, started before its tests and stopped after: for
 * counts (INFO deltas) that no other file's commands may touch. `admin` reads them (set once the
 * server is up); `connection()` opens a client that is closed after all.
 */
export function ownServer(): { readonly admin: Redis; connection(): Promise<Redis> } {
  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  const connections: Redis[] = [];
  beforeAll(async () => {
    server = await startRedisServer();
    admin = await connect(server.url);
  });
  afterAll(async () => {
    for (const client of connections) if (client.status !== 'end') client.disconnect();
    admin?.disconnect();
    await server?.stop();
  });
  return {
    get admin() {
      return admin!;
    },
    async connection() {
      const client = await connect(server!.url);
      connections.push(client);
      return client;
    },
  };
}

/**
 * A redis-server of the calling test file's own that its tests stall (SIGSTOP / SIGCONT through
 * `pause(true|false)`), resumed and killed after all; `breakerStore(prefix)` is a Redis store on
 * it whose breaker opens after 2 timed-out calls (100 ms each) and cools down for a minute, so
 * only Redis answering again (the stalled calls' late replies) ends the cool-down in a test.
 */
export function stallableServer(): {
  pause(stopped: boolean): void;
  breakerStore(prefix: string): Promise<RedisStore>;
} {
  let server: RedisServer | undefined;
  const clients: Redis[] = [];
  const pause = (stopped: boolean) => {
    try {
      if (server !== undefined) process.kill(server.pid, stopped ? 'SIGSTOP' : 'SIGCONT');
    } catch {
      // already gone
    }
  };
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    pause(false);
    for (const client of clients) client.disconnect();
    await server?.stop('SIGKILL');
  });
  return {
    pause,
    async breakerStore(prefix) {
      const client = await connect(server!.url, { retryStrategy: () => 20 });
      client.on('error', () => {});
      clients.push(client);
      return redisStore({ client, prefix, commandTimeout: 100, breaker: { threshold: 2, coolDown: 60_000 } });
    },
  };
}

/** A binary codec: payloads that are not UTF-8 (a 0xff 0x00 head), read back with the Buffer commands. */
export const binaryCodec: Codec = {
  binary: true,
  encode: (e) => Buffer.concat([Buffer.from([0xff, 0x00]), Buffer.from(JSON.stringify(e.value))]),
  decode: (raw) => {
    const buf = raw as Buffer;
    if (!Buffer.isBuffer(buf) || buf[0] !== 0xff) throw new Error('not mine');
    return entry(JSON.parse(buf.subarray(2).toString()), Infinity, Infinity);
  },
};

export function entry<V>(value: V, freshUntil = Date.now() + 60_000, staleUntil = freshUntil): Entry<V> {
  return { value, freshUntil, staleUntil };
}

export interface RecordingReporter extends StoreReporter {
  readonly encodeErrors: { key: string; error: unknown }[];
  readonly decodeErrors: { key: string; error: unknown }[];
}

export function recordingReporter(): RecordingReporter {
  const encodeErrors: { key: string; error: unknown }[] = [];
  const decodeErrors: { key: string; error: unknown }[] = [];
  return {
    encodeErrors,
    decodeErrors,
    encodeError: (key, error) => void encodeErrors.push({ key, error }),
    decodeError: (key, error) => void decodeErrors.push({ key, error }),
  };
}

/** `INFO commandstats` as command → calls. Commands run inside scripts are counted too. */
export async function commandCalls(client: Redis): Promise<Record<string, number>> {
  const info = await client.info('commandstats');
  const calls: Record<string, number> = {};
  for (const line of info.split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match) calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

/** Calls per command between two snapshots, without the INFO calls themselves. */
export function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, count] of Object.entries(after)) {
    const diff = count - (before[name] ?? 0);
    if (diff > 0 && name !== 'info') out[name] = diff;
  }
  return out;
}

/** Counts writes on the client's socket: one write per round trip (ioredis writes a pipeline at once). */
export function countSocketWrites(client: Redis): { readonly count: number; stop(): void } {
  const stream = (client as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
  const original = stream.write;
  const counter = {
    count: 0,
    stop() {
      stream.write = original;
    },
  };
  stream.write = function (this: unknown, ...args: unknown[]) {
    counter.count++;
    return original.apply(this, args);
  };
  return counter;
}

/** Runs `work` and returns the commands the server ran (`admin` reads INFO) and the writes on `client`'s socket. */
export async function roundTrips(
  admin: Redis,
  client: Redis,
  work: () => Promise<unknown>,
): Promise<{ commands: Record<string, number>; writes: number }> {
  const before = await commandCalls(admin);
  const socket = countSocketWrites(client);
  try {
    await work();
  } finally {
    socket.stop();
  }
  return { commands: delta(before, await commandCalls(admin)), writes: socket.count };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` until it returns true or `timeoutMs` passes; returns whether it did. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 20,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(everyMs);
  }
}

/**
 * Probes a store (its server stalled or down) until its breaker is open: whether it opened within
 * `timeoutMs`. Each probe's call times out and counts as a failure.
 */
export function breakerOpens(
  store: { getMany(keys: readonly string[]): Promise<unknown>; readonly breakerState: string },
  timeoutMs = 10_000,
): Promise<boolean> {
  return eventually(
    async () => {
      await store.getMany(['probe']).catch(() => undefined);
      return store.breakerState === 'open';
    },
    timeoutMs,
    0,
  );
}

/** A clock whose sleeps (the lock poll's backoff) never end: only an announcement moves a waiter. */
export function stuckClock() {
  const sleeps: number[] = [];
  return { now: () => Date.now(), sleeps, sleep: (ms: number) => (sleeps.push(ms), new Promise<void>(() => {})) };
}

/** Rejects, naming what did not happen, if `promise` takes longer than `ms`. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The two worlds a test runs in: `[name, store]` for the memory store (undefined: the default) and
 * a redisStore on the shared server under a prefix of its own (one connection for the file, opened
 * before its tests and closed after). Call at the top of a file, for describe.each.
 */
export function memoryAndRedis(label: string, names: [string, string] = ['memory', 'redis']) {
  let client: Redis;
  beforeAll(async () => {
    client = await connect();
  });
  afterAll(async () => {
    await client.quit();
  });
  const stores: [string, () => RedisStore | undefined][] = [
    [names[0], () => undefined],
    [names[1], () => redisStore({ client, prefix: randomPrefix(label) })],
  ];
  return stores;
}

/**
 * Least privilege: the ACL rule in docs/redis.md (and the README, which must agree) is what herdcache
 * needs. On a private redis-server (its ACLs and script cache are this file's own), a scenario that
 * sends every command the store, the lock, the tags, the subscriber and the tiered bus send runs as
 * a user with exactly that rule: the same fills as the default user, no store error, nothing in
 * ACL LOG. With each command of the rule taken away in turn, the loads are still answered and Redis
 * logs the refusal (so the rule has nothing extra), and a missing permission is said once
 * (HERDCACHE_REDIS_NOPERM), naming the command (one refused inside a script too), not once per
 * call or per operation. Once per process: the warning tests come first, or forget what was said.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import type { Store } from '../../src/core/store';
import { _forgetNoPermWarnings, NOPERM_WARNING } from '../../src/redis/permissions';
import { tagVersionKey } from '../../src/redis/keys';
import { redisStore } from '../../src/redis/redis-store';
import { tieredStore } from '../../src/redis/tiered';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { eventually } from './helpers';

const PREFIX = 'herdcache:';
const RULE = /^ACL SETUSER herdcache (.+)$/m;

/** The documented rule's tokens after the user name, with the placeholder password. */
function documentedRule(file: string): string[] {
  const text = readFileSync(join(__dirname, '../..', file), 'utf8');
  const match = RULE.exec(text);
  if (match === null) throw new Error(`${file} has no line "ACL SETUSER herdcache …"`);
  return match[1]!.trim().split(/\s+/);
}

const rule = documentedRule('docs/redis.md');
const commands = rule.filter((token) => token.startsWith('+')).map((token) => token.slice(1));

let server: RedisServer;
let admin: Redis;
let users = 0;
const opened: Redis[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
});

afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

afterEach(() => {
  for (const client of opened.splice(0)) client.disconnect();
});

/** A user with the rule's tokens (password replaced); the client options to log in as it. */
async function user(tokens: readonly string[]): Promise<{ username: string; password: string }> {
  const username = `herdcache-test-${++users}`;
  const password = `pw-${users}`;
  await admin.call('ACL', 'SETUSER', username, 'reset', ...tokens.map((t) => (t.startsWith('>') ? `>${password}` : t)));
  return { username, password };
}

function client(login: { username: string; password: string } | undefined): Redis {
  const connection = new Redis({ port: server.port, host: '127.0.0.1', ...login });
  // Refusals show as store errors, warnings and ACL LOG entries; ioredis's own error events are noise.
  connection.on('error', () => undefined);
  opened.push(connection);
  return connection;
}

/** ACL LOG entries of one user: [reason, context, object] each. */
async function aclLog(username: string): Promise<string[]> {
  const entries = (await admin.call('ACL', 'LOG', '1000')) as (string | number)[][];
  const out: string[] = [];
  for (const flat of entries) {
    const entry: Record<string, string | number> = {};
    for (let i = 0; i < flat.length; i += 2) entry[String(flat[i])] = flat[i + 1]!;
    if (entry.username === username) out.push(`${entry.reason} ${entry.context} ${entry.object}`);
  }
  return out;
}

interface Outcome {
  readonly fills: Record<string, number>;
  readonly answers: unknown[];
  readonly woken: number;
  readonly received: number;
  readonly storeErrors: number;
}

/**
 * Everything herdcache sends: a contended fill (lock, waiter registered, subscriber opened, woken
 * by the fenced write's announcement), a failed fill (release script), unlocked fills (write
 * script), prime (SET PX), invalidate (script), tags over a garbage version key (MGET, INCR fails,
 * TIME), the tiered store's message between two replicas (PUBLISH, SUBSCRIBE), clear (SCAN,
 * UNLINK), close (UNSUBSCRIBE). Every wait is bounded, so a refused command costs time, not a hang.
 */
async function scenario(login: { username: string; password: string } | undefined): Promise<Outcome> {
  await admin.flushall();
  await admin.script('FLUSH'); // the first script call of each connection is an EVAL again
  const fills: Record<string, number> = {};
  const count = (key: string) => (fills[key] = (fills[key] ?? 0) + 1);
  const storeA = redisStore({ client: client(login) });
  const storeB = redisStore({ client: client(login) });
  const caches: Cache[] = [];
  const cache = (store: Store) => {
    const made = createCache({ store, ttl: 60_000, lockPollInterval: 50, lockWaitTimeout: 2000 });
    caches.push(made);
    return made;
  };
  const a = cache(storeA);
  const b = cache(storeB);
  const answers: unknown[] = [];

  // A fills k under its lock while B waits for it, woken by the announcement.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const first = a.getOrCompute('k', async () => {
    count('k');
    await gate;
    return 'k1';
  });
  await eventually(async () => (await admin.exists(`${PREFIX}{k}:lock`)) === 1, 1000, 5);
  const second = b.getOrCompute('k', async () => {
    count('k');
    return 'k2';
  });
  await eventually(() => storeB.waitStats().channels > 0, 1000, 5);
  release();
  answers.push(await first, await second);

  // A failed fill releases its lock; unlocked fills; prime.
  answers.push(
    await a
      .getOrCompute('f', async () => {
        count('f');
        throw new Error('fill failed');
      })
      .catch((error: Error) => error.message),
  );
  for (const replica of [a, b]) answers.push(await replica.getOrCompute('u', async () => count('u'), { lock: false }));
  const primed = a.loader<string, string>({ name: 'p', batch: async (keys) => keys.map((key) => `${count(key)}`) });
  await primed.prime('p1', 'primed');
  answers.push(
    await b.loader<string, string>({ name: 'p', batch: async (keys) => keys.map((key) => `${count(key)}`) }).load('p1'),
  );

  // invalidate: the next load fills again.
  await a.invalidate('k');
  answers.push(await b.getOrCompute('k', async () => `k${count('k')}`));

  // Tags, over a version key holding garbage (the bump resets it from the server's clock).
  await admin.set(tagVersionKey(PREFIX, 'T', 256), 'garbage');
  const tagged = (replica: Cache) => replica.getOrCompute('t', async () => `t${count('t')}`, { tags: ['T'] });
  answers.push(await tagged(a)); // versions unknown: served, not cached
  await a.invalidateTags(['T']);
  answers.push(await tagged(a), await tagged(b));

  // The tiered store: a change on one replica drops the other's L1 copy.
  const subscribers = [client(login), client(login)];
  const tiers = subscribers.map((subscriber) =>
    tieredStore({ l2: redisStore({ client: client(login) }), subscriber, l1: memoryStore(), l1Ttl: 60_000 }),
  );
  const [t1, t2] = tiers.map((tier) => cache(tier)) as [Cache, Cache];
  await eventually(() => tiers.every((tier) => tier.stats().subscribed), 1000, 5);
  answers.push(await t1.getOrCompute('x', async () => `x${count('x')}`));
  answers.push(await t2.getOrCompute('x', async () => `x${count('x')}`));
  // Heard: the message of this invalidation, not the one of t1's earlier write.
  const heard = tiers[1]!.stats().received;
  await t1.invalidate('x');
  await eventually(() => tiers[1]!.stats().received > heard, 1000, 5);
  answers.push(await t2.getOrCompute('x', async () => `x${count('x')}`));

  await a.clear();
  answers.push(await b.getOrCompute('u', async () => count('u'), { lock: false }));

  const woken = storeB.waitStats().woken;
  const received = tiers[1]!.stats().received;
  const storeErrors = caches.reduce((sum, made) => sum + made.metrics().total.storeErrors, 0);
  await Promise.all(caches.map((made) => made.close()));
  return { fills, answers, woken, received, storeErrors };
}

let warnings: { message: string; code: string | undefined }[];
let warningSpy: jest.SpyInstance;
let consoleSpy: jest.SpyInstance;
beforeEach(() => {
  warnings = [];
  warningSpy = jest.spyOn(process, 'emitWarning').mockImplementation(((warning: string | Error, options?: unknown) => {
    const code = typeof options === 'object' && options !== null ? (options as { code?: string }).code : undefined;
    warnings.push({ message: String(warning), code });
  }) as typeof process.emitWarning);
  // ioredis prints its own line when INFO (its ready check) is refused.
  consoleSpy = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
});
afterEach(() => {
  warningSpy.mockRestore();
  consoleSpy.mockRestore();
});

function noPerm() {
  return warnings.filter((warning) => warning.code === NOPERM_WARNING);
}

it('the README gives the same rule as docs/redis.md, with the prefix the store uses', () => {
  expect(documentedRule('README.md')).toEqual(rule);
  expect(rule).toEqual(expect.arrayContaining([`~${PREFIX}*`, `&${PREFIX}*`, '-@all']));
  expect(redisStore({ client: admin }).prefix).toBe(PREFIX);
});

it('a user with exactly the documented rule: the same fills as the default user, no store error, nothing refused', async () => {
  const asDefault = await scenario(undefined);
  expect(asDefault.storeErrors).toBe(0);
  expect(asDefault.woken).toBeGreaterThan(0);
  expect(asDefault.received).toBeGreaterThan(0);
  const login = await user(rule);
  await admin.call('ACL', 'LOG', 'RESET');
  const asUser = await scenario(login);
  expect(await aclLog(login.username)).toEqual([]);
  expect(asUser.storeErrors).toBe(0);
  expect(asUser.answers).toEqual(asDefault.answers);
  expect(asUser.fills).toEqual(asDefault.fills);
  expect(asUser.woken).toBeGreaterThan(0);
  expect(asUser.received).toBeGreaterThan(0);
  expect(asUser.fills).toEqual({ k: 2, f: 1, u: 2, t: 2, x: 2 });
  expect(noPerm()).toEqual([]);
});

it('a user without +evalsha: every load answered, one warning naming EVALSHA however many calls fail', async () => {
  const login = await user(rule.filter((token) => token !== '+evalsha'));
  const outcome = await scenario(login);
  expect(outcome.storeErrors).toBeGreaterThan(5);
  expect(outcome.answers).toContain('k1');
  const [warning, ...more] = noPerm();
  expect(more.map(({ message }) => message)).toEqual([]);
  expect(warning!.message).toMatch(/^herdcache: the Redis user may not run EVALSHA \(sent by [\w.]+\)/);
  expect(warning!.message).toContain('docs/redis.md');
});

it('a user without +publish: the tiered store still answers, one warning naming PUBLISH', async () => {
  const login = await user(rule.filter((token) => token !== '+publish'));
  const outcome = await scenario(login);
  expect(outcome.received).toBe(0);
  const messages = noPerm().map(({ message }) => message);
  expect(messages).toHaveLength(1);
  expect(messages[0]).toMatch(/may not run PUBLISH \(sent by publish\)/);
});

it('a user without +get: the scripts’ GET refused fails them (counted), never read as a missing value; one warning naming GET', async () => {
  const login = await user(rule.filter((token) => token !== '+get'));
  const outcome = await scenario(login);
  // Read as missing, the lock scripts sent waiters to wait for a value they could not see (the
  // whole lockWaitTimeout), with nothing counted and nothing said.
  expect(outcome.storeErrors).toBeGreaterThan(0);
  // Refused inside every script (lock, release, writes, invalidate, tags): Redis says only the
  // script's line; the warning names the command that line runs, once.
  const messages = noPerm().map(({ message }) => message);
  expect(messages).toHaveLength(1);
  expect(messages[0]).toMatch(/^herdcache: the Redis user may not run GET \(inside herdcache's [\w.]+ script\)/);
});

describe('the rule without one of its commands: at most one warning for it, naming it', () => {
  it.each(commands)('-%s', async (command) => {
    _forgetNoPermWarnings();
    const login = await user(rule.filter((token) => token !== `+${command}`));
    await scenario(login);
    const messages = noPerm().map(({ message }) => message);
    // Every warning names a command (a late call of the previous case's user may name its own).
    for (const message of messages) expect(message).toMatch(/^herdcache: the Redis user may not run [A-Z|]+ \(/);
    const upper = command.toUpperCase();
    expect(messages.filter((message) => message.includes(`may not run ${upper} (`)).length).toBeLessThanOrEqual(1);
  });
});

describe('the rule without one of its commands: loads still answered, the refusal logged', () => {
  it.each(commands)('-%s', async (command) => {
    const asDefault = await scenario(undefined);
    const login = await user(rule.filter((token) => token !== `+${command}`));
    await admin.call('ACL', 'LOG', 'RESET');
    const outcome = await scenario(login);
    expect(outcome.answers).toHaveLength(asDefault.answers.length);
    expect((await aclLog(login.username)).some((entry) => entry.endsWith(` ${command}`))).toBe(true);
  });
});

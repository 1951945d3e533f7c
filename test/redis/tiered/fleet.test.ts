/**
 * The tiered store across real processes: two replicas (forked Node processes, each with its own
 * registry, L1 and two Redis connections) sharing one Redis. A change on one must reach the other's
 * L1 over pub/sub; the deadlines below are far under l1Ttl (5 s), so only a pub/sub drop can meet
 * them. Time is asserted by polling with a deadline, never by a fixed sleep.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { connect, randomPrefix } from '../helpers';

const FIXTURE = join(__dirname, 'fixtures', 'tiered-replica.ts');
/** How long a change on A may take to show on B through pub/sub (measured: a few ms). */
const PROPAGATION_DEADLINE = 1000;

interface Reply {
  id: number;
  ok: boolean;
  value?: unknown;
  error?: string;
}

class ReplicaProcess {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  #seq = 0;
  readonly ready: Promise<void>;

  constructor(env: Record<string, string>) {
    this.#child = fork(FIXTURE, [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, REDIS_URL: process.env.REDIS_URL!, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.ready = new Promise((resolve, reject) => this.#pending.set(0, { resolve: () => resolve(), reject }));
    this.#child.on('message', (reply: Reply) => {
      const waiter = this.#pending.get(reply.id);
      if (waiter === undefined) return;
      this.#pending.delete(reply.id);
      if (reply.ok) waiter.resolve(reply.value);
      else waiter.reject(new Error(`replica: ${reply.error ?? 'not ready'}`));
    });
    this.#child.on('exit', (code, signal) => {
      for (const waiter of this.#pending.values()) waiter.reject(new Error(`replica exited (${code ?? signal})`));
      this.#pending.clear();
    });
  }

  send<T = unknown>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#seq;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.#child.send({ id, op, ...args });
    });
  }

  get = (key: string, tags?: string[]) => this.send<string>('get', { key, tags });
  peek = (key: string) => this.send<string | null>('peek', { key });

  async exit(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    await this.send('exit').catch(() => undefined);
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    if (this.#child.exitCode === null) this.#child.kill('SIGKILL');
  }
}

/** Polls `check` every few ms until it holds; returns the ms it took, or throws past the deadline. */
async function within(deadlineMs: number, what: string, check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > deadlineMs) throw new Error(`${what}: not within ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

let admin: Redis;
let prefix: string;
let a: ReplicaProcess;
let b: ReplicaProcess;
/** A third replica with a short l1Ttl, for the deaf case. */
let c: ReplicaProcess;
const measured: Record<string, number> = {};

beforeAll(async () => {
  admin = await connect();
  prefix = randomPrefix('tiered-fleet');
  a = new ReplicaProcess({ TIERED_PREFIX: prefix });
  b = new ReplicaProcess({ TIERED_PREFIX: prefix });
  c = new ReplicaProcess({ TIERED_PREFIX: prefix, TIERED_L1_TTL: '1500' });
  await Promise.all([a.ready, b.ready, c.ready]);
}, 120_000); // forks three tsx processes: seconds on a loaded machine

afterAll(async () => {
  await Promise.all([a?.exit(), b?.exit(), c?.exit()]);
  await admin.quit();
  // The numbers the report quotes: pub/sub propagation, measured, not asserted beyond the deadline.
  if (Object.keys(measured).length > 0)
    console.log(`tiered fleet, ms from the change on A to the new value on B: ${JSON.stringify(measured)}`);
});

const setDb = (key: string, value: string) => admin.set(`${prefix}db:${key}`, value);

/** `replica` has `key` in its L1 (filled from L2 or by its own fill) with `value`. */
async function cachedOn(replica: ReplicaProcess, key: string, value: string, tags?: string[]): Promise<void> {
  await within(
    PROPAGATION_DEADLINE,
    `caching ${key}`,
    async () => (await replica.get(key, tags)) === value && (await replica.peek(key)) === value,
  );
}

it('a write on A (loader.prime) makes B drop its L1 copy: B reads the new value within milliseconds', async () => {
  await setDb('item:1', 'v1');
  expect(await a.get('item:1')).toBe('v1');
  await cachedOn(b, 'item:1', 'v1');
  await setDb('item:1', 'v2');
  await a.send('write', { key: 'item:1', value: 'v2' });
  measured.write = await within(PROPAGATION_DEADLINE, 'B sees the write', async () => (await b.get('item:1')) === 'v2');
});

it('an invalidate on A: B drops its copy and its next read fills the new value', async () => {
  await setDb('k', 'v1');
  expect(await a.get('k')).toBe('v1');
  await cachedOn(b, 'k', 'v1');
  await setDb('k', 'v2');
  await a.send('invalidate', { key: 'k' });
  measured.invalidate = await within(PROPAGATION_DEADLINE, 'B drops k', async () => (await b.peek('k')) === null);
  expect(await b.get('k')).toBe('v2');
});

it('invalidateTags on A is seen on B: its tagged copies go, untagged ones stay', async () => {
  await setDb('user:1', 'u1@1');
  await setDb('plain', 'p1');
  expect(await a.get('user:1', ['User:1'])).toBe('u1@1');
  await cachedOn(b, 'user:1', 'u1@1', ['User:1']);
  await cachedOn(b, 'plain', 'p1');
  await setDb('user:1', 'u1@2');
  await a.send('invalidateTags', { tags: ['User:1'] });
  measured.invalidateTags = await within(
    PROPAGATION_DEADLINE,
    'B sees the tag invalidation',
    async () => (await b.get('user:1', ['User:1'])) === 'u1@2',
  );
  expect(await b.peek('plain')).toBe('p1');
});

it('C loses its subscriber: its L1 is emptied, and while deaf a copy is stale for at most l1Ttl (1.5 s)', async () => {
  await setDb('d', 'v1');
  await cachedOn(c, 'd', 'v1');
  await c.send('dropSubscriber');
  type Stats = { store: { subscribed: boolean; l1Size: number } };
  await within(
    PROPAGATION_DEADLINE,
    'C notices the drop',
    async () => !(await c.send<Stats>('stats')).store.subscribed,
  );
  expect((await c.send<Stats>('stats')).store).toMatchObject({ subscribed: false, l1Size: 0 });
  // Deaf: C copies d again, A invalidates it, C does not hear it and keeps serving its copy...
  expect(await c.get('d')).toBe('v1');
  expect(await c.peek('d')).toBe('v1');
  await setDb('d', 'v2');
  await a.send('invalidate', { key: 'd' });
  expect(await c.get('d')).toBe('v1');
  // ...until l1Ttl (1500 ms) has passed since the copy was made.
  measured.deafStaleness = await within(
    1500 + 1000,
    'C serves the new value once l1Ttl passed',
    async () => (await c.get('d')) === 'v2',
  );
});

/**
 * A small value travels in its write's announcement: the waiter answers from it instead of
 * re-reading the key (before, every woken waiter tried the lock again, took the free lock only to
 * find the value there, and released it: two script calls per waiting process after each write).
 * The message carries the payload the fenced write just wrote under its lock, in the same atomic
 * script, so it is that write's value. Large values, releases, writers of an earlier version and
 * values the waiter cannot use (outdated tags) still go through the re-read. Counted on a server
 * of this file's own (INFO commandstats, the messages on the wire), never timed.
 */
import type Redis from 'ioredis';
import { createCache, type Cache } from '../../src/core/cache';
import type { Codec } from '../../src/redis/codec';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { ANNOUNCED_BYTES_PER_CALL, ANNOUNCED_VALUE_MAX, parseAnnouncement } from '../../src/redis/fill-channels';
import { deferred } from '../helpers';
import {
  binaryCodec as binary,
  commandCalls,
  delta,
  entry,
  eventually,
  ownServer,
  stuckClock,
  within,
} from './helpers';

const own = ownServer();
const connection = () => own.connection();

beforeAll(async () => {
  // The scripts' first calls on this server answer NOSCRIPT, then go as EVAL: not in the counts.
  const warm = createCache({ store: redisStore({ client: await connection(), prefix: 'warm:' }), ttl: 60_000 });
  await warm.getOrCompute('w', async () => 1);
});

interface Waiter {
  store: RedisStore;
  cache: Cache;
  /** Raw messages its subscriber connection received. */
  messages: Buffer[];
  /** Lock attempts (the script calls that re-read a key) its client sent. */
  attempts(): number;
}

async function waiter(prefix: string, codec?: Codec): Promise<Waiter> {
  const client = await connection();
  const subscriber = await connection();
  const messages: Buffer[] = [];
  subscriber.on('messageBuffer', (_channel: Buffer, message: Buffer) => messages.push(message));
  const commands = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const store = redisStore({ client, prefix, subscriber, codec });
  let attempts = 0;
  const acquire = commands.herdcacheLockAcquire3!;
  commands.herdcacheLockAcquire3 = (...args: unknown[]) => (attempts++, acquire.apply(client, args));
  const cache = createCache({
    store,
    ttl: 60_000,
    clock: stuckClock(),
    lockPollInterval: 10_000,
    lockWaitTimeout: 60_000,
  });
  expect(await eventually(() => store.waitStats().channels === 1, 5000, 2)).toBe(true);
  return { store, cache, messages, attempts: () => attempts };
}

/** A holder filling `key` until `gate` resolves, and `waiters` contending for it (registered on its lock). */
async function stampede<T>(prefix: string, key: string, waiters: Waiter[], gate: Promise<T>, codec?: Codec) {
  const holder = createCache({ store: redisStore({ client: await connection(), prefix, codec }), ttl: 60_000 });
  const filling = deferred<void>();
  const held = holder.getOrCompute(key, async () => (filling.resolve(), gate));
  await filling.promise;
  let fills = 0;
  const waited = waiters.map((w) => w.cache.getOrCompute(key, async () => (fills++, 'by-waiter')));
  for (const w of waiters) expect(await eventually(() => w.cache.metrics().total.lockContended === 1, 5000)).toBe(true);
  return { holder, held, waited: Promise.all(waited), fills: () => fills };
}

it('a small value rides in the announcement: each waiting process answers from it, no lock attempt after the write', async () => {
  const prefix = 'wv1:';
  const waiters = [await waiter(prefix), await waiter(prefix)];
  const gate = deferred<{ name: string }>();
  const run = await stampede(prefix, 'k', waiters, gate.promise);
  const attempts = waiters.map((w) => w.attempts());
  const before = await commandCalls(own.admin);
  gate.resolve({ name: 'by-holder' });
  expect(await run.held).toEqual({ name: 'by-holder' });
  expect(await within(run.waited, 5000, 'the waiters answered by the message')).toEqual([
    { name: 'by-holder' },
    { name: 'by-holder' },
  ]);
  expect(run.fills()).toBe(0);
  // The holder's write script, its two PUBLISHes, and nothing from the waiters: no re-read, no lock
  // taken and released (before: 5 script calls, the write plus an attempt and a release per waiter).
  const ran = delta(before, await commandCalls(own.admin));
  // (EVAL: the holder's connection sends each script as EVAL the first time, EVALSHA after.)
  expect({ scripts: (ran.eval ?? 0) + (ran.evalsha ?? 0), publish: ran.publish }).toEqual({ scripts: 1, publish: 2 });
  expect(waiters.map((w) => w.attempts() - attempts[waiters.indexOf(w)]!)).toEqual([0, 0]);
  for (const w of waiters) {
    expect(w.messages).toHaveLength(1);
    const { key, payload } = parseAnnouncement(w.messages[0]!, false);
    expect(key).toBe('wv1:{k}');
    expect(JSON.parse(payload as string)).toMatchObject({ d: { name: 'by-holder' } });
    expect(w.store.waitStats()).toMatchObject({ woken: 1, polled: 0, received: 1 });
  }
  for (const w of waiters) await w.cache.close();
  await run.holder.close();
});

it('with a binary codec: the payload rides as written, and the waiter answers from it', async () => {
  const prefix = 'wv6:';
  const w = await waiter(prefix, binary);
  const gate = deferred<{ n: number }>();
  const run = await stampede(prefix, 'k', [w], gate.promise, binary);
  const attempts = w.attempts();
  gate.resolve({ n: 7 });
  expect(await within(run.waited, 5000, 'the waiter answered by the message')).toEqual([{ n: 7 }]);
  expect(w.attempts() - attempts).toBe(0);
  const { payload } = parseAnnouncement(w.messages[0]!, true);
  expect(payload).toEqual(Buffer.concat([Buffer.from([0xff, 0x00]), Buffer.from('{"n":7}')]));
  await w.cache.close();
  await run.holder.close();
});

it('a value over the limit is announced by its key alone: the woken waiter re-reads it in a lock attempt', async () => {
  const prefix = 'wv2:';
  const w = await waiter(prefix);
  const big = 'x'.repeat(ANNOUNCED_VALUE_MAX + 1);
  const gate = deferred<string>();
  const run = await stampede(prefix, 'k', [w], gate.promise);
  const attempts = w.attempts();
  gate.resolve(big);
  expect(await within(run.waited, 5000, 'the waiter answered by its re-read')).toEqual([big]);
  expect(run.fills()).toBe(0);
  expect(w.attempts() - attempts).toBe(1);
  expect(w.messages.map((m) => m.toString())).toEqual(['wv2:{k}']);
  await w.cache.close();
  await run.holder.close();
});

it('an announced value the waiter cannot use (its tag invalidated since the holder read it) is not answered: the waiter fills', async () => {
  const prefix = 'wv3:';
  const w = await waiter(prefix);
  const gate = deferred<string>();
  const holder = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  const filling = deferred<void>();
  const held = holder.getOrCompute('k', async () => (filling.resolve(), gate.promise), { tags: ['T'] });
  await filling.promise;
  // Another replica invalidates T: the holder's value records the version before it.
  const other = createCache({ store: redisStore({ client: await connection(), prefix }), ttl: 60_000 });
  await other.invalidateTags(['T']);
  let fills = 0;
  const waited = w.cache.getOrCompute('k', async () => (fills++, 'by-waiter'), { tags: ['T'] });
  expect(await eventually(() => w.cache.metrics().total.lockContended === 1, 5000)).toBe(true);
  const attempts = w.attempts();
  gate.resolve('by-holder, outdated');
  expect(await held).toBe('by-holder, outdated');
  expect(await within(waited, 5000, 'the waiter, after its own fill')).toBe('by-waiter');
  expect(fills).toBe(1);
  expect(w.attempts() - attempts).toBe(1); // the message carried the value; it was not used
  expect(parseAnnouncement(w.messages[0]!, false).payload).toBeDefined();
  await w.cache.close();
  await holder.close();
  await other.close();
});

it("a late message of an earlier lock's write only wakes the waiter: it answers with the value of the lock it found", async () => {
  const prefix = 'wv5:';
  const w = await waiter(prefix);
  const gate = deferred<string>();
  const run = await stampede(prefix, 'k', [w], gate.promise);
  const attempts = w.attempts();
  // As if a write under an earlier lock (say, before an invalidation this load came after) had
  // announced its value to this process and the message were only arriving now.
  const id = (await own.admin.get('wv5:{k}:waiters'))!;
  const key = 'wv5:{k}';
  const token = 'an-earlier-lock';
  const payload = JSON.stringify({ v: 1, f: Date.now() + 60_000, s: Date.now() + 60_000, d: 'late, outdated' });
  const hex = (n: number) => n.toString(16).padStart(8, '0');
  await own.admin.publish(`wv5:filled.${id}`, `${key}${token}${payload}${hex(key.length)}${hex(token.length)}`);
  // Woken, it tries the lock again (still held by the holder it found), and waits on.
  expect(await eventually(() => w.attempts() === attempts + 1, 5000, 2)).toBe(true);
  expect(await eventually(async () => (await own.admin.get('wv5:{k}:waiters')) === id, 5000, 2)).toBe(true);
  gate.resolve('by-holder');
  expect(await within(run.waited, 5000, 'the waiter answered by the holder')).toEqual(['by-holder']);
  expect(w.attempts()).toBe(attempts + 1);
  expect(run.fills()).toBe(0);
  await w.cache.close();
  await run.holder.close();
});

describe('the write script', () => {
  let client: Redis;
  let store: RedisStore;
  let listener: Redis;
  const heard: { channel: string; message: Buffer }[] = [];
  const prefix = 'wv4:';
  const register = (key: string, waiterId: string) =>
    (client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>).herdcacheLockAcquire3!(
      2,
      `${prefix}{${key}}`,
      `${prefix}{${key}}:lock`,
      'someone-else',
      10_000,
      waiterId,
    );

  beforeAll(async () => {
    client = await connection();
    store = redisStore({ client, prefix, subscriber: false });
    listener = await connection();
    listener.on('messageBuffer', (channel: Buffer, message: Buffer) =>
      heard.push({ channel: channel.toString(), message }),
    );
    await listener.subscribe(`${prefix}filled.old`, `${prefix}filled.new+`);
  });

  beforeEach(() => {
    heard.length = 0;
  });

  it('tells a waiter of an earlier version (id without the mark) the key alone, a value reader the key and the value', async () => {
    await store.lock.acquire(['k'], 'tok', 10_000);
    await register('k', 'old');
    await register('k', 'new+');
    expect(await store.lock.writeAndRelease([{ key: 'k', entry: entry('v'), ttl: 60_000 }], 'tok')).toEqual([true]);
    expect(await eventually(() => heard.length === 2, 5000, 2)).toBe(true);
    const byChannel = Object.fromEntries(heard.map((h) => [h.channel, h.message]));
    expect(byChannel[`${prefix}filled.old`]!.toString()).toBe(`${prefix}{k}`);
    const { key, token, payload } = parseAnnouncement(byChannel[`${prefix}filled.new+`]!, true);
    expect(key).toBe(`${prefix}{k}`);
    expect(token).toBe('tok');
    expect(payload).toEqual(await client.getBuffer(`${prefix}{k}`));
  });

  it('announces nothing for a write fenced out (its lock lost): only the value the key holds is ever carried', async () => {
    await store.lock.acquire(['f'], 'slow', 10_000);
    await store.delete(['f']); // an invalidation removes the lock: the slow fill is fenced out
    await store.lock.acquire(['f'], 'fast', 10_000);
    await register('f', 'new+');
    expect(await store.lock.writeAndRelease([{ key: 'f', entry: entry('old'), ttl: 60_000 }], 'slow')).toEqual([false]);
    expect(await store.lock.writeAndRelease([{ key: 'f', entry: entry('new'), ttl: 60_000 }], 'fast')).toEqual([true]);
    expect(await eventually(() => heard.length === 1, 5000, 2)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 50)); // nothing else arrives
    expect(heard).toHaveLength(1);
    const { payload } = parseAnnouncement(heard[0]!.message, false);
    expect(JSON.parse(payload as string)).toMatchObject({ d: 'new' });
  });

  it('an unencodable value releases its lock and is announced by its key alone', async () => {
    await store.lock.acquire(['u'], 'tok', 10_000);
    await register('u', 'new+');
    expect(await store.lock.writeAndRelease([{ key: 'u', entry: entry(1n), ttl: 60_000 }], 'tok')).toEqual([false]);
    expect(await eventually(() => heard.length === 1, 5000, 2)).toBe(true);
    expect(heard[0]!.message.toString()).toBe(`${prefix}{u}`);
  });

  it('carries at most ANNOUNCED_BYTES_PER_CALL of values per call: past it, keys alone', async () => {
    const n = 100;
    const keys = Array.from({ length: n }, (_, i) => `b${i}`);
    await store.lock.acquire(keys, 'tok', 10_000);
    for (const key of keys) await register(key, 'new+');
    const value = 'y'.repeat(ANNOUNCED_VALUE_MAX - 200);
    const writes = keys.map((key) => ({ key, entry: entry(value), ttl: 60_000 }));
    expect(await store.lock.writeAndRelease(writes, 'tok')).toEqual(keys.map(() => true));
    expect(await eventually(() => heard.length === n, 5000, 2)).toBe(true);
    const parsed = heard.map((h) => parseAnnouncement(h.message, true));
    const carried = parsed.filter((p) => p.payload !== undefined);
    const size = carried[0]!.payload!.length;
    expect(size).toBeLessThanOrEqual(ANNOUNCED_VALUE_MAX);
    expect(carried).toHaveLength(Math.floor(ANNOUNCED_BYTES_PER_CALL / size));
    expect(parsed.map((p) => p.key)).toEqual(keys.map((key) => `${prefix}{${key}}`));
  });
});

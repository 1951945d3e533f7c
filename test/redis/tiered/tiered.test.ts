/**
 * The tiered store in one process, on the shared real redis-server: replicas are pairs of
 * connections (L2 + subscriber) with their own L1 and registry. Timing is asserted by polling with a
 * deadline, never by a fixed sleep; round trips are counted on the client's socket.
 */
import type Redis from 'ioredis';
import { HerdcacheError } from '../../../src/core/errors';
import { manualClock } from '../../../src/core/freshness';
import { memoryStore } from '../../../src/core/memory';
import { redisStore } from '../../../src/redis/redis-store';
import type { StoreReporter } from '../../../src/core/store';
import { tieredStore } from '../../../src/redis/tiered';
import { deferred } from '../../helpers';
import { connect, countSocketWrites, entry, eventually, randomPrefix } from '../helpers';
import { controllableL2, replica, type Replica } from './helpers';

let admin: Redis;
const open: Replica[] = [];

beforeAll(async () => {
  admin = await connect();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  await admin.quit();
});

async function pair(options: Partial<Parameters<typeof replica>[0]> = {}): Promise<[Replica, Replica]> {
  const prefix = options.prefix ?? randomPrefix('tiered');
  const a = await replica({ ...options, prefix });
  const b = await replica({ ...options, prefix });
  open.push(a, b);
  return [a, b];
}

const WAIT = 2000;

/** Until `from` has published `count` messages and `to` applied them (`from` the only publisher so far). */
function heard(from: Replica, to: Replica, count: number): Promise<boolean> {
  return eventually(
    () => from.store.stats().published >= count && to.store.stats().received >= from.store.stats().published,
    WAIT,
    1,
  );
}

describe('options', () => {
  it('names the option and the bad value', async () => {
    const client = await connect();
    const subscriber = client.duplicate();
    try {
      const l2 = redisStore({ client, prefix: randomPrefix('opts') });
      const cases: [Record<string, unknown>, string][] = [
        [{ subscriber }, 'l2'],
        [{ l2: memoryStore(), subscriber }, 'l2'],
        [{ l2 }, 'subscriber'],
        [{ l2, subscriber: client }, 'subscriber'],
        [{ l2, subscriber, l1: new Map() }, 'l1'],
        [{ l2, subscriber, l1Ttl: 0 }, 'l1Ttl'],
        [{ l2, subscriber, l1Ttl: Infinity }, 'l1Ttl'],
        [{ l2, subscriber, l1Ttl: 1e20 }, 'l1Ttl'], // capped as ttl is: 1e15
        [{ l2, subscriber, l1Ttl: '5000' }, 'l1Ttl'],
        [{ l2, subscriber, channel: '' }, 'channel'],
        [{ l2, subscriber, clock: {} }, 'clock'],
      ];
      expect.assertions(cases.length * 2);
      for (const [options, name] of cases) {
        try {
          tieredStore(options as never);
        } catch (error) {
          expect(error).toMatchObject({ code: 'E_INVALID_OPTION' });
          expect((error as Error).message).toContain(`"${name}"`);
        }
      }
    } finally {
      client.disconnect();
      subscriber.disconnect();
    }
  });
});

describe('reads', () => {
  it('an L1 hit costs no round trip: 100 loads of a cached key write nothing on the socket', async () => {
    const [a] = await pair();
    let fills = 0;
    const fill = async () => `v${++fills}`;
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    expect(await eventually(() => a.store.getSync('k') !== undefined, WAIT, 2)).toBe(true);
    const socket = countSocketWrites(a.client);
    const values = await Promise.all(Array.from({ length: 100 }, () => a.cache.getOrCompute('k', fill)));
    socket.stop();
    expect(new Set(values)).toEqual(new Set(['v1']));
    expect(socket.count).toBe(0);
    expect(fills).toBe(1);
  });

  it('an L1 hit reads the clock once (the registry judges the copy): 100 warm loads, 100 clock reads', async () => {
    const base = manualClock();
    let reads = 0;
    const clock = { now: () => (reads++, base.now()), sleep: (ms: number) => base.sleep(ms) };
    const [a] = await pair({ clock, cache: { ttl: 60_000 } });
    let fills = 0;
    const fill = async () => `v${++fills}`;
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    expect(await eventually(() => a.store.getSync('k') !== undefined, WAIT, 2)).toBe(true);
    reads = 0;
    for (let i = 0; i < 100; i++) expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    expect(reads).toBe(100);
    expect(fills).toBe(1);
  });

  it('a copy past l1Ttl is not answered from L1, fresh as its value is: the load reads L2 (one MGET), then L1 again', async () => {
    const clock = manualClock();
    const [a] = await pair({ clock, l1Ttl: 5000, cache: { ttl: 60_000 } });
    let fills = 0;
    const fill = async () => `v${++fills}`;
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    expect(await eventually(() => a.store.getSync('k') !== undefined, WAIT, 2)).toBe(true);
    let socket = countSocketWrites(a.client);
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    socket.stop();
    expect(socket.count).toBe(0); // within l1Ttl: L1
    clock.advance(5000);
    socket = countSocketWrites(a.client);
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    socket.stop();
    expect(socket.count).toBe(1); // past l1Ttl: L2, though the value has 55 s to live
    expect(fills).toBe(1);
    expect(a.cache.metrics().total.staleServed).toBe(0);
    expect(await eventually(() => a.store.getSync('k') !== undefined, WAIT, 2)).toBe(true);
    socket = countSocketWrites(a.client);
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    socket.stop();
    expect(socket.count).toBe(0); // copied into L1 again
  });

  it('getMany answers from L1 what it holds and reads the rest with one MGET, copying L2 hits into L1', async () => {
    const [a] = await pair();
    await a.l2.setMany(['b', 'c'].map((key) => ({ key, entry: entry(`l2-${key}`), ttl: 60_000 })));
    await a.store.setMany([{ key: 'a', entry: entry('l1-a'), ttl: 60_000 }]);
    expect(a.store.getSync('a')?.value).toBe('l1-a');
    const socket = countSocketWrites(a.client);
    const found = await a.store.getMany(['a', 'b', 'c', 'd']);
    socket.stop();
    expect(found.map((e) => e?.value)).toEqual(['l1-a', 'l2-b', 'l2-c', undefined]);
    expect(socket.count).toBe(1);
    expect(a.store.getSync('b')?.value).toBe('l2-b');
    expect(a.store.getSync('c')?.value).toBe('l2-c');
  });

  it('an L1 copy lives at most l1Ttl, even though the entry is fresh for longer', async () => {
    const clock = manualClock(Date.now());
    const [a] = await pair({ clock, l1Ttl: 1000 });
    await a.store.setMany([{ key: 'k', entry: entry('v', clock.now() + 60_000), ttl: 60_000 }]);
    expect(a.store.getSync('k')?.value).toBe('v');
    clock.advance(999);
    expect(a.store.getSync('k')?.value).toBe('v');
    clock.advance(1);
    expect(a.store.getSync('k')).toBeUndefined();
    expect(a.store.stats().l1Size).toBe(0);
    // L2 still has it: the next async read copies it again, for another l1Ttl.
    expect((await a.store.getMany(['k']))[0]?.value).toBe('v');
    expect(a.store.getSync('k')?.value).toBe('v');
  });
});

describe('coherence between replicas', () => {
  it('an invalidate on A makes B drop its L1 copy; B then reads the new value', async () => {
    const [a, b] = await pair();
    let db = 'v1';
    const fill = async () => db;
    expect(await a.cache.getOrCompute('k', fill)).toBe('v1');
    expect(await heard(a, b, 1)).toBe(true);
    expect(await b.cache.getOrCompute('k', fill)).toBe('v1');
    expect(await eventually(() => b.store.getSync('k') !== undefined, WAIT, 1)).toBe(true);
    db = 'v2';
    await a.cache.invalidate('k');
    expect(a.store.getSync('k')).toBeUndefined();
    expect(await eventually(() => b.store.getSync('k') === undefined, WAIT, 1)).toBe(true);
    expect(await b.cache.getOrCompute('k', fill)).toBe('v2');
  });

  it('a write on A (loader.prime, a fill) drops B copy; messages carry the sender, which ignores its own', async () => {
    const [a, b] = await pair();
    await b.store.setMany([{ key: 'user:1', entry: entry('old'), ttl: 60_000 }]);
    expect(b.store.getSync('user:1')?.value).toBe('old');
    expect(await heard(b, a, 1)).toBe(true); // else B's message, landing during A's write, keeps A from copying it
    const users = a.cache.loader<number, string>({ name: 'user', batch: async (ids) => ids.map(String) });
    const receivedByA = a.store.stats().received;
    const receivedByB = b.store.stats().received;
    const publishedByA = a.store.stats().published;
    await users.prime(1, 'new');
    expect(a.store.getSync('user:1')?.value).toBe('new');
    expect(await eventually(() => b.store.getSync('user:1') === undefined, WAIT, 1)).toBe(true);
    // A prime is a fence (a delete) and then the write: two messages, which B hears both of.
    const sent = a.store.stats().published - publishedByA;
    expect(sent).toBe(2);
    expect(await eventually(() => b.store.stats().received === receivedByB + sent, WAIT, 1)).toBe(true);
    expect(a.store.stats().received).toBe(receivedByA);
    expect((await b.store.getMany(['user:1']))[0]?.value).toBe('new');
  });

  it('invalidateTags on A: A drops its tagged copies at once, B on the message; both read the new value', async () => {
    const [a, b] = await pair();
    let db = 1;
    const fill = async () => `u1@${db}`;
    const read = (r: Replica) => r.cache.getOrCompute('user:1', fill, { tags: ['User:1'] });
    expect(await read(a)).toBe('u1@1');
    expect(await heard(a, b, 1)).toBe(true);
    expect(await eventually(() => a.store.getSync('user:1') !== undefined, WAIT, 1)).toBe(true);
    expect(await read(b)).toBe('u1@1');
    expect(await eventually(() => b.store.getSync('user:1') !== undefined, WAIT, 1)).toBe(true);
    await b.store.setMany([{ key: 'untagged', entry: entry('stays'), ttl: 60_000 }]);
    expect(await heard(b, a, 1)).toBe(true);
    db = 2;
    const done = a.cache.invalidateTags(['User:1']);
    expect(a.store.getSync('user:1')).toBeUndefined(); // before the bump even reached Redis
    await done;
    expect(await eventually(() => b.store.getSync('user:1') === undefined, WAIT, 1)).toBe(true);
    expect(b.store.getSync('untagged')?.value).toBe('stays');
    expect(await read(b)).toBe('u1@2');
    expect(await read(a)).toBe('u1@2');
  });

  it('delete removes the L2 value and its fill lock, so a fill on another replica started before cannot write', async () => {
    const [a] = await pair();
    await a.store.setMany([{ key: 'k', entry: entry('v'), ttl: 60_000 }]);
    await a.store.lock.acquire(['k'], 'someone', 60_000);
    expect(await admin.exists(`${a.l2.prefix}{k}`, `${a.l2.prefix}{k}:lock`)).toBe(2);
    await a.store.delete(['k']);
    expect(await admin.exists(`${a.l2.prefix}{k}`, `${a.l2.prefix}{k}:lock`)).toBe(0);
    expect(a.store.getSync('k')).toBeUndefined();
    const published = a.store.stats().published;
    expect(await a.store.lock.writeAndRelease([{ key: 'k', entry: entry('late'), ttl: 60_000 }], 'someone')).toEqual([
      false,
    ]);
    expect(a.store.getSync('k')).toBeUndefined(); // fenced out: not copied, not announced
    expect(a.store.stats().published).toBe(published);
  });

  it('tells the registry about remote invalidations (delete, tags, clear), not about remote writes', async () => {
    const [a, b] = await pair();
    const calls: unknown[][] = [];
    const reporter: StoreReporter = {
      encodeError() {},
      decodeError() {},
      remoteInvalidation: (...args) => void calls.push(args),
    };
    b.store.bind(reporter);
    await a.store.setMany([{ key: 'w', entry: entry(1), ttl: 1000 }]);
    await a.store.delete(['k1', 'k2']);
    await a.store.invalidateTags(['T']);
    await a.store.clear();
    expect(await eventually(() => b.store.stats().received === 4, WAIT, 1)).toBe(true);
    expect(calls).toEqual([
      [['k1', 'k2'], [], false],
      [[], ['T'], false],
      [[], [], true],
    ]);
  });

  it('an unreadable message on the channel empties L1 (another herdcache version may mean anything)', async () => {
    const [a] = await pair();
    await a.store.setMany([{ key: 'k', entry: entry('v'), ttl: 60_000 }]);
    const clears = a.store.stats().l1Clears;
    await admin.publish(`${a.l2.prefix}invalidate`, '{"from":"x","op":"rename","keys":["k"]}');
    expect(await eventually(() => a.store.stats().l1Clears === clears + 1, WAIT, 1)).toBe(true);
    expect(a.store.getSync('k')).toBeUndefined();
  });
});

describe('what may enter L1', () => {
  it('an L2 read in flight when another replica changes the key is answered but not copied into L1', async () => {
    const prefix = randomPrefix('tiered-window');
    const a = await replica({ prefix });
    let control!: ReturnType<typeof controllableL2>['control'];
    const b = await replica({
      prefix,
      wrapL2: (l2) => {
        const c = controllableL2(l2);
        control = c.control;
        return c.wrapped;
      },
    });
    open.push(a, b);
    await a.store.setMany([{ key: 'k', entry: entry('v1'), ttl: 60_000 }]);
    expect(await heard(a, b, 1)).toBe(true);
    const gate = deferred<void>();
    control.hold = gate.promise;
    const read = b.store.getMany(['k']); // MGET sent now, answer held
    await a.store.setMany([{ key: 'k', entry: entry('v2'), ttl: 60_000 }]);
    expect(await heard(a, b, 2)).toBe(true);
    control.hold = undefined;
    gate.resolve();
    expect((await read)[0]?.value).toBe('v1'); // what L2 had when the read ran
    expect(b.store.getSync('k')).toBeUndefined(); // ...but it is not kept
    expect(b.store.stats().refused).toBeGreaterThanOrEqual(1);
    expect((await b.store.getMany(['k']))[0]?.value).toBe('v2');
    expect(b.store.getSync('k')?.value).toBe('v2');
  });

  it('a write issued here while an older read is in flight wins in L1', async () => {
    const prefix = randomPrefix('tiered-local');
    let control!: ReturnType<typeof controllableL2>['control'];
    const b = await replica({
      prefix,
      wrapL2: (l2) => {
        const c = controllableL2(l2);
        control = c.control;
        return c.wrapped;
      },
    });
    open.push(b);
    await b.l2.setMany([{ key: 'k', entry: entry('old'), ttl: 60_000 }]);
    const gate = deferred<void>();
    control.hold = gate.promise;
    const read = b.store.getMany(['k']);
    control.hold = undefined;
    await b.store.setMany([{ key: 'k', entry: entry('new'), ttl: 60_000 }]);
    gate.resolve();
    expect((await read)[0]?.value).toBe('old');
    expect(b.store.getSync('k')?.value).toBe('new');
  });

  it('a tagged L2 entry is copied into L1 only once its tag versions are found current', async () => {
    const [a] = await pair();
    const [before] = await a.l2.tagVersions(['T']);
    await a.l2.invalidateTags(['T']);
    const [current] = await a.l2.tagVersions(['T']);
    await a.l2.setMany([
      {
        key: 'stale',
        entry: { ...entry('written by a fill that raced the bump'), tags: ['T'], tagVersions: [before!] },
        ttl: 60_000,
      },
      { key: 'current', entry: { ...entry('ok'), tags: ['T'], tagVersions: [current!] }, ttl: 60_000 },
      { key: 'unversioned', entry: { ...entry('?'), tags: ['T'] }, ttl: 60_000 },
    ]);
    const found = await a.store.getMany(['stale', 'current', 'unversioned']);
    expect(found.map((e) => e?.value)).toEqual(['written by a fill that raced the bump', 'ok', '?']); // the registry judges these
    expect(await eventually(() => a.store.getSync('current') !== undefined, WAIT, 1)).toBe(true);
    expect(a.store.getSync('stale')).toBeUndefined();
    expect(a.store.getSync('unversioned')).toBeUndefined();
  });

  it('a fill that raced an invalidateTags on another replica is not served from L1 (the sync path skips tag checks)', async () => {
    const [a, b] = await pair();
    let db = 'old';
    const gate = deferred<void>();
    let started = false;
    const slow = async () => {
      started = true;
      const seen = db;
      await gate.promise;
      return seen;
    };
    const first = a.cache.getOrCompute('k', slow, { tags: ['T'] });
    expect(await eventually(() => started, WAIT, 1)).toBe(true);
    db = 'new';
    await b.cache.invalidateTags(['T']);
    gate.resolve();
    expect(await first).toBe('old');
    // A's write landed in L2 (a miss there: old version) and is announced; it must not become an L1 copy.
    expect(await eventually(async () => (await admin.exists(`${a.l2.prefix}{k}`)) === 1, WAIT, 2)).toBe(true);
    expect(await eventually(() => a.store.stats().refused >= 1, WAIT, 1)).toBe(true); // its versions were checked
    expect(a.store.getSync('k')).toBeUndefined();
    expect(await a.cache.getOrCompute('k', async () => db, { tags: ['T'] })).toBe('new');
  });
});

describe('losing the subscription', () => {
  it('subscriber.disconnect(): L1 is emptied, and copies made while deaf live at most l1Ttl', async () => {
    const clock = manualClock(Date.now());
    const [a, b] = await pair({ clock, l1Ttl: 1000 });
    await b.store.setMany([{ key: 'k', entry: entry('v1', clock.now() + 60_000), ttl: 60_000 }]);
    expect(b.store.stats().l1Size).toBe(1);
    b.subscriber.disconnect();
    expect(await eventually(() => !b.store.subscribed, WAIT, 1)).toBe(true);
    expect(b.store.stats().l1Size).toBe(0);
    // Deaf: B copies k again, A changes it, B does not hear it...
    expect((await b.store.getMany(['k']))[0]?.value).toBe('v1');
    await a.store.setMany([{ key: 'k', entry: entry('v2', clock.now() + 60_000), ttl: 60_000 }]);
    expect(b.store.getSync('k')?.value).toBe('v1');
    // ...for at most l1Ttl.
    clock.advance(1000);
    expect(b.store.getSync('k')).toBeUndefined();
    expect((await b.store.getMany(['k']))[0]?.value).toBe('v2');
  });

  it('CLIENT KILL of the subscriber: L1 emptied at the drop and again at the resubscribe; drops flow again after', async () => {
    const prefix = randomPrefix('tiered-kill');
    const name = `hc-sub-${prefix.split(':')[2]}`;
    const a = await replica({ prefix });
    const b = await replica({ prefix, connectionName: name });
    open.push(a, b);
    await b.store.setMany([{ key: 'k', entry: entry('v1'), ttl: 60_000 }]);
    const clears = b.store.stats().l1Clears;
    const list = (await admin.client('LIST')) as string;
    const id = /id=(\d+) .*name=(\S+)/g;
    const ids = [...list.matchAll(id)].filter((m) => m[2] === name).map((m) => m[1]!);
    expect(ids).toHaveLength(1);
    await admin.client('KILL', 'ID', ids[0]!);
    expect(await eventually(() => b.store.stats().l1Clears >= clears + 2 && b.store.subscribed, 5000, 5)).toBe(true);
    expect(b.store.getSync('k')).toBeUndefined();
    await b.store.getMany(['k']);
    expect(b.store.getSync('k')?.value).toBe('v1');
    await a.store.setMany([{ key: 'k', entry: entry('v2'), ttl: 60_000 }]);
    expect(await eventually(() => b.store.getSync('k') === undefined, WAIT, 1)).toBe(true);
  });

  it('a failed PUBLISH empties the publisher L1 and fails the call with a coded error', async () => {
    let control!: ReturnType<typeof controllableL2>['control'];
    const a = await replica({
      prefix: randomPrefix('tiered-pub'),
      wrapL2: (l2) => {
        const c = controllableL2(l2);
        control = c.control;
        return c.wrapped;
      },
    });
    open.push(a);
    await a.store.setMany([{ key: 'other', entry: entry('x'), ttl: 60_000 }]);
    control.failPublish = true;
    const error = await a.store.setMany([{ key: 'k', entry: entry('v'), ttl: 60_000 }]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HerdcacheError);
    expect(error).toMatchObject({ code: 'E_STORE_ERROR' });
    expect(a.store.getSync('other')).toBeUndefined();
    expect(a.store.stats()).toMatchObject({ publishFailures: 1, l1Size: 0 });
    expect((await a.l2.getMany(['k']))[0]?.value).toBe('v'); // L2 took the write
  });

  it('close() stops listening: later messages are not applied', async () => {
    const [a, b] = await pair();
    await b.store.close();
    const received = b.store.stats().received;
    await a.store.delete(['k']);
    // Nothing to wait for but the absence of an effect: A's own message round trip bounds it.
    const probe = await replica({ prefix: a.l2.prefix });
    open.push(probe);
    await a.store.delete(['k2']);
    expect(await eventually(() => probe.store.stats().received >= 1, WAIT, 1)).toBe(true);
    expect(b.store.stats().received).toBe(received);
    expect(b.store.subscribed).toBe(false);
  });
});

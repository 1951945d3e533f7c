/**
 * Tags on the Redis store, against a real redis-server: versions in the codec, one MGET to read
 * them, one script call to bump them, their expiry, the clamp on tagged entries, and the race the
 * versions exist for (a fill on one replica, an invalidateTags on another).
 */
import type Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { jsonCodec } from '../../src/redis/codec';
import { redisStore, type RedisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { deferred, flush } from '../helpers';
import {
  commandCalls,
  connect,
  delta,
  entry,
  eventually,
  randomPrefix,
  recordingReporter,
  roundTrips,
} from './helpers';

const DAY = 24 * 60 * 60 * 1000;

describe('codec: tags and tag versions', () => {
  it('round-trips tags and versions; a payload without them (format 1 as before) still decodes', () => {
    const tagged = { value: { id: 1 }, freshUntil: 10, staleUntil: 20, tags: ['User:1', 'Users'], tagVersions: [3, 0] };
    const raw = jsonCodec.encode(tagged) as string;
    expect(JSON.parse(raw)).toMatchObject({ v: 1, t: ['User:1', 'Users'], g: [3, 0] });
    expect(jsonCodec.decode(raw)).toEqual(tagged);
    expect(jsonCodec.decode(jsonCodec.encode({ value: 1, freshUntil: 10, staleUntil: 20, tags: ['T'] }))).toEqual({
      value: 1,
      freshUntil: 10,
      staleUntil: 20,
      tags: ['T'],
    });
    expect(jsonCodec.decode('{"v":1,"f":10,"s":20,"d":"old"}')).toEqual({
      value: 'old',
      freshUntil: 10,
      staleUntil: 20,
    });
    // No tags: no "t", no "g" (empty tags are no tags).
    expect(jsonCodec.encode({ value: 1, freshUntil: 1, staleUntil: 1, tags: [], tagVersions: [] })).toBe(
      '{"v":1,"f":1,"s":1,"d":1}',
    );
  });

  it.each([
    ['versions without tags', '{"v":1,"f":1,"s":1,"g":[1],"d":1}'],
    ['tags not an array', '{"v":1,"f":1,"s":1,"t":"User:1","d":1}'],
    ['an empty tag list', '{"v":1,"f":1,"s":1,"t":[],"d":1}'],
    ['a tag that is not a string', '{"v":1,"f":1,"s":1,"t":[1],"d":1}'],
    ['an empty tag', '{"v":1,"f":1,"s":1,"t":[""],"d":1}'],
    ['versions not aligned with tags', '{"v":1,"f":1,"s":1,"t":["A","B"],"g":[1],"d":1}'],
    ['a version that is not an integer', '{"v":1,"f":1,"s":1,"t":["A"],"g":[1.5],"d":1}'],
    ['a negative version', '{"v":1,"f":1,"s":1,"t":["A"],"g":[-1],"d":1}'],
    ['a version as a string', '{"v":1,"f":1,"s":1,"t":["A"],"g":["1"],"d":1}'],
  ])('rejects %s (read as a miss)', (_, raw) => {
    expect(() => jsonCodec.decode(raw)).toThrow(expect.objectContaining({ code: 'E_STORE_DECODE' }));
  });

  it('refuses to encode versions that are not integers aligned with the tags (the write is skipped, not half-fenced)', () => {
    expect(() => jsonCodec.encode({ value: 1, freshUntil: 1, staleUntil: 1, tags: ['A'], tagVersions: [NaN] })).toThrow(
      expect.objectContaining({ code: 'E_STORE_ENCODE' }),
    );
    expect(() =>
      jsonCodec.encode({ value: 1, freshUntil: 1, staleUntil: 1, tags: ['A'], tagVersions: [1, 2] }),
    ).toThrow(expect.objectContaining({ code: 'E_STORE_ENCODE' }));
  });
});

describe('on a server of its own (commands counted)', () => {
  let server: RedisServer;
  let client: Redis;
  let admin: Redis;
  let store: RedisStore;
  const tags = Array.from({ length: 100 }, (_, i) => `Tag:${i}`);

  beforeAll(async () => {
    server = await startRedisServer();
    client = await connect(server.url);
    admin = await connect(server.url);
    store = redisStore({ client, prefix: 'tags:', tagTtl: 60_000 });
    await store.invalidateTags(['warm']); // scripts go as EVAL once per connection, EVALSHA after
  });

  afterAll(async () => {
    await client.quit();
    await admin.quit();
    await server.stop();
  });

  const measure = (work: () => Promise<unknown>) => roundTrips(admin, client, work);

  it('reads the versions of 100 tags with one script call (a missing one made), and bumps them with one', async () => {
    let versions: number[] = [];
    const read = await measure(async () => {
      versions = await store.tagVersions(tags);
    });
    // One command on the wire; INFO also counts what the script ran: per tag a GET, and for a
    // missing version key a SET (made at the server's time in microseconds, one TIME per call).
    // (EVAL the first time: the script is not loaded on this server yet.)
    const { eval: evals = 0, evalsha = 0, ...ran } = read.commands as Record<string, number>;
    expect({ calls: evals + evalsha, ran, writes: read.writes }).toEqual({
      calls: 1,
      ran: { get: 100, set: 100, time: 1 },
      writes: 1,
    });
    const made = versions[0]!;
    expect(made).toBeGreaterThan(1e15); // microseconds
    expect(versions).toEqual(tags.map(() => made));
    const again = await measure(async () => {
      versions = await store.tagVersions(tags);
    });
    // Present: each read, and its expiry looked at (given again past half of it).
    expect(again).toEqual({ commands: { evalsha: 1, get: 100, pttl: 100 }, writes: 1 });
    expect(versions).toEqual(tags.map(() => made));

    const bump = await measure(() => store.invalidateTags(tags));
    // One command on the wire (EVALSHA); INFO also counts the commands the script ran: the tag
    // clock's reading (GET, TIME, SET), then per tag its version (GET, SET) and reading (GET, SET).
    expect(bump).toEqual({ commands: { evalsha: 1, get: 201, set: 201, time: 1 }, writes: 1 });
    const bumped = await store.tagVersions(tags);
    for (const version of bumped) expect(version).toBeGreaterThan(made);
    await store.invalidateTags(tags.slice(0, 2));
    const [a, b, c] = await store.tagVersions(tags.slice(0, 3));
    expect(a).toBeGreaterThan(bumped[0]!);
    expect(b).toBeGreaterThan(bumped[1]!);
    expect(c).toBe(bumped[2]);
  });

  it('keeps a version key 2 × tagTtl after its last bump, and never scans the keyspace', async () => {
    const before = await commandCalls(admin);
    await store.invalidateTags(['User:7']);
    const keys = (await admin.keys('tags:tag:*')).filter((key) => key.includes('User:7'));
    // Its version, and beside it the tag clock's reading at that bump (tag-clock.ts): both expire.
    expect(keys.sort()).toEqual(['tags:tag:{User:7}', 'tags:tag:{User:7}:seq']);
    for (const key of [...keys, 'tags:tag:clock']) {
      const pttl = await admin.pttl(key);
      expect(pttl).toBeGreaterThan(120_000 - 1000);
      expect(pttl).toBeLessThanOrEqual(120_000);
    }
    const used = delta(before, await commandCalls(admin));
    expect(used.scan).toBeUndefined();
    expect(used.keys).toBe(1); // the assertion's own KEYS above, on the admin connection
  });

  it('clamps a tagged entry to tagTtl (setMany and the fenced write); untagged entries keep their ttl', async () => {
    await store.setMany([
      { key: 'tagged', entry: { ...entry('t', Infinity), tags: ['A'], tagVersions: [0] }, ttl: Infinity },
      { key: 'long', entry: { ...entry('t'), tags: ['A'], tagVersions: [0] }, ttl: DAY },
      { key: 'plain', entry: entry('p', Infinity), ttl: Infinity },
    ]);
    expect(await admin.pttl('tags:{tagged}')).toBeGreaterThan(59_000);
    expect(await admin.pttl('tags:{tagged}')).toBeLessThanOrEqual(60_000);
    expect(await admin.pttl('tags:{long}')).toBeLessThanOrEqual(60_000);
    expect(await admin.pttl('tags:{plain}')).toBe(-1);
    await store.lock.acquire(['fenced'], 'tok', 5000);
    expect(
      await store.lock.writeAndRelease(
        [{ key: 'fenced', entry: { ...entry('f', Infinity), tags: ['A'], tagVersions: [0] }, ttl: Infinity }],
        'tok',
      ),
    ).toEqual([true]);
    expect(await admin.pttl('tags:{fenced}')).toBeLessThanOrEqual(60_000);
  });
});

describe('on the shared server', () => {
  let client: Redis;
  let other: Redis;

  beforeAll(async () => {
    client = await connect();
    other = await connect();
  });

  afterAll(async () => {
    await client.quit();
    await other.quit();
  });

  it('validates tagTtl, naming it', () => {
    for (const bad of [0, -1, 1.5, Infinity, '7d', 2 ** 53]) {
      expect(() => redisStore({ client, tagTtl: bad as never })).toThrow(
        /option "tagTtl" must be a positive integer number of milliseconds/,
      );
    }
  });

  it('long tags and tags starting with "}" get a key of bounded length in one slot', async () => {
    const prefix = randomPrefix('tags-long');
    const store = redisStore({ client, prefix, maxKeyLength: 100 });
    const long = 'L'.repeat(1000);
    await store.invalidateTags([long, '}odd']);
    const [l, odd, other] = await store.tagVersions([long, '}odd', 'other']);
    expect([l, odd, other].every((v) => Number.isSafeInteger(v) && v! > 1e15)).toBe(true);
    const keys = (await client.keys(`${prefix}tag:*`)).filter((key) => key !== `${prefix}tag:clock`);
    // per invalidated tag, its version and its reading of the tag clock; `other`'s version, made by the read
    expect(keys).toHaveLength(5);
    for (const key of keys) expect(key.length).toBeLessThan(prefix.length + 110 + ':seq'.length);
  });

  it('a version key that is not ours is made ours by the read (as a bump would): the value is cached', async () => {
    // Read as unknown (NaN) and left, it kept every value of the tag out of the cache, silently.
    const prefix = randomPrefix('tags-garbage');
    const store = redisStore({ client, prefix });
    await client.set(`${prefix}tag:{T}`, 'not a number');
    const [made] = await store.tagVersions(['T']);
    expect(Number.isSafeInteger(made) && made! > 1e15).toBe(true);
    expect(await client.get(`${prefix}tag:{T}`)).toBe(String(made));
    const cache = createCache({ ttl: Infinity, store });
    let fills = 0;
    const fill = async () => ++fills;
    expect(await cache.getOrCompute('k', fill, { tags: ['T'] })).toBe(1);
    expect(await cache.getOrCompute('k', fill, { tags: ['T'] })).toBe(1);
    expect(await client.exists(`${prefix}{k}`)).toBe(1);
  });

  it('through createCache: after invalidateTags, entries recorded with the old version are misses; others stay hits', async () => {
    const prefix = randomPrefix('tags-cache');
    const store = redisStore({ client, prefix });
    const reporter = recordingReporter();
    const cache = createCache({
      ttl: Infinity,
      store,
      hooks: { onStoreError: (error) => reporter.decodeError('', error) },
    });
    let version = 1;
    const users = cache.loader<number, string>({
      name: 'user',
      batch: async (ids) => ids.map((id) => `u${id}@${version}`),
      tags: (id) => [`User:${id}`],
    });
    expect(await users.loadMany([1, 2])).toEqual(['u1@1', 'u2@1']);
    const stored = JSON.parse((await client.get(`${prefix}{user:1}`))!) as { t: string[]; g: number[] };
    const [made] = await store.tagVersions(['User:1']);
    expect(stored).toMatchObject({ t: ['User:1'], g: [made] });
    version = 2;
    await cache.invalidateTags(['User:1']);
    expect(await users.loadMany([1, 2])).toEqual(['u1@2', 'u2@1']);
    const [bumped] = await store.tagVersions(['User:1']);
    expect(bumped).toBeGreaterThan(made!);
    expect(JSON.parse((await client.get(`${prefix}{user:1}`))!)).toMatchObject({ g: [bumped] });
    expect(await users.loadMany([1, 2])).toEqual(['u1@2', 'u2@1']);
    expect(cache.metrics().sources.user).toMatchObject({ fills: 3, hits: 3 });
    expect(reporter.decodeErrors).toEqual([]);
  });

  it('a fill racing invalidateTags on another replica: the old value is answered to its callers but never served again, anywhere', async () => {
    const prefix = randomPrefix('tags-race');
    const a = createCache({ ttl: Infinity, store: redisStore({ client, prefix }) });
    const b = createCache({ ttl: Infinity, store: redisStore({ client: other, prefix }) });
    let db = 'old';
    const gate = deferred<void>();
    let fills = 0;
    const slowFill = async () => {
      fills++;
      const seen = db; // the fill reads the database when it starts
      await gate.promise;
      return seen;
    };
    const fill = async () => {
      fills++;
      return db;
    };
    const first = a.getOrCompute('k', slowFill, { tags: ['T'] });
    await eventually(() => fills === 1, 2000, 5);
    // Replica B: the write to the database, then the invalidation, which completes while A fills.
    db = 'new';
    await b.invalidateTags(['T']);
    gate.resolve();
    expect(await first).toBe('old'); // A's callers were already waiting on this fill
    await eventually(async () => (await client.exists(`${prefix}{k}`)) === 1, 2000, 5);
    // Landed, fenced by its version: the one A read before B's bump.
    const landed = JSON.parse((await client.get(`${prefix}{k}`))!) as { d: string; g: number[] };
    expect(landed.d).toBe('old');
    expect(landed.g[0]).toBeLessThan((await redisStore({ client, prefix }).tagVersions(['T']))[0]!);
    expect(await b.getOrCompute('k', fill, { tags: ['T'] })).toBe('new');
    expect(await a.getOrCompute('k', fill, { tags: ['T'] })).toBe('new');
    expect(fills).toBe(2); // B refilled once; A then hit B's value
    await flush();
  });
});

/**
 * A @cached field whose value holds promises or Errors in its properties (src/graphql/settle.ts):
 * graphql-js reports each failed one at its own path; with the cache the answer is the same, and a
 * value where one failed is never cached (it was, and its error was served to every caller until
 * the ttl). A value whose promises all resolve is cached as the resolver returned it.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { valueSize } from '../../src/core/sizes';
import { jsonCodec } from '../../src/redis/codec';
import { cachedDirectiveTransformer, cachedFieldKey, herdcacheContext } from '../../src/graphql';
import { Partial, SETTLE_WAIT_MS, partialOrThrow, settleValue } from '../../src/graphql/settle';
import { deferred, flush } from '../helpers';
import { makeSchema, run } from './fixtures';

const execFileAsync = promisify(execFile);

const typeDefs = `
  type Query { post: Post @cached(ttl: 60), posts: [Post] @cached(ttl: 60) }
  type Post { id: ID!, title: String, author: Author, editor: Author, tags: [String], labels: [String] }
  type Author { name: String, tags: [String] }
`;

function setup(resolvers: Record<string, () => unknown>, options: Record<string, unknown> = {}) {
  const store = memoryStore();
  const cache = createCache({ store });
  const calls: Record<string, number> = {};
  const counted = Object.fromEntries(
    Object.entries(resolvers).map(([name, resolve]) => [
      name,
      () => ((calls[name] = (calls[name] ?? 0) + 1), resolve()),
    ]),
  );
  const schema = makeSchema(typeDefs, { Query: counted });
  cachedDirectiveTransformer(schema, { cache, ...options });
  const stored = (field: string) => store.getSync(cachedFieldKey(`Query.${field}`, {}))?.value;
  return { schema, cache, calls, stored };
}

const summary = (result: Awaited<ReturnType<typeof run>>) => ({
  data: result.data,
  errors: result.errors?.map((error) => ({ message: error.message, path: error.path })),
});

const uncached = async (resolvers: Record<string, () => unknown>, source: string) =>
  summary(await run(makeSchema(typeDefs, { Query: resolvers }), source));

/** Runs `source` twice: the same answer as without a cache each time, the resolver run twice (not cached). */
async function notCached(resolvers: Record<string, () => unknown>, source: string, field: string, errors: number) {
  const expected = await uncached(resolvers, source);
  expect(expected.errors).toHaveLength(errors);
  const { schema, calls, stored } = setup(resolvers);
  expect(summary(await run(schema, source))).toEqual(expected);
  expect(summary(await run(schema, source))).toEqual(expected);
  expect(calls[field]).toBe(2);
  expect(stored(field)).toBeUndefined();
}

describe.each([
  ['a rejected promise', () => Promise.reject(new Error('db down'))],
  ['a returned Error', () => new Error('db down')],
])('a part holding %s: answered as without a cache (the error at its path), not cached', (_name, failure) => {
  it('a property', () =>
    notCached(
      { post: () => ({ id: '1', title: failure(), author: { name: 'Ann' } }) },
      '{ post { id title author { name } } }',
      'post',
      1,
    ));

  it('an array in a nested object', () =>
    notCached(
      { post: () => ({ id: '1', author: { name: 'Ann', tags: ['a', failure()] } }) },
      '{ post { author { tags } } }',
      'post',
      1,
    ));

  it("a list's item's property", () =>
    notCached(
      {
        posts: () => [
          { id: '1', title: failure() },
          { id: '2', title: 'ok' },
        ],
      },
      '{ posts { id title } }',
      'posts',
      1,
    ));

  it('inside what a promise resolved to', () =>
    notCached(
      { post: () => ({ id: '1', author: Promise.resolve({ name: failure() }) }) },
      '{ post { author { name } } }',
      'post',
      1,
    ));
});

it('healed, it is cached; its promises resolved are read by graphql-js from the cached value', async () => {
  let healthy = false;
  const { schema, calls } = setup({
    post: () => ({ id: '1', title: healthy ? Promise.resolve('Hello') : Promise.reject(new Error('db down')) }),
  });
  expect((await run(schema, '{ post { title } }')).errors).toHaveLength(1);
  healthy = true;
  for (let i = 0; i < 3; i++)
    expect((await run(schema, '{ post { title } }')).data).toEqual({ post: { title: 'Hello' } });
  expect(calls.post).toBe(2);
});

it('a node shared by two properties (a constant, one author as author and editor) does not stop caching', async () => {
  const EMPTY: string[] = [];
  const { schema, calls } = setup({
    post: () => {
      const user = { name: 'Ann' };
      return { id: '1', tags: EMPTY, labels: EMPTY, author: user, editor: user, title: Promise.resolve('t') };
    },
  });
  for (let i = 0; i < 3; i++)
    expect((await run(schema, '{ post { id title author { name } } }')).errors).toBeUndefined();
  expect(calls.post).toBe(1);
});

it('getters are not called, a lazy thenable is not started, a non-enumerable property is kept', async () => {
  let lazyRuns = 0;
  let getterReads = 0;
  const post = () => {
    const value: Record<string, unknown> = {
      id: '1',
      comments: { then: (ok: (v: string) => void) => (lazyRuns++, ok('x')) }, // a query builder
      get expensive(): string {
        getterReads++;
        return 'read';
      },
      author: Promise.resolve({ name: 'Ann' }),
    };
    Object.defineProperty(value, 'title', { value: 'Hello', enumerable: false });
    return value;
  };
  const { schema, calls } = setup({ post });
  const source = '{ post { id title author { name } } }';
  for (let i = 0; i < 2; i++) {
    const result = await run(schema, source);
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ post: { id: '1', title: 'Hello', author: { name: 'Ann' } } });
  }
  expect(calls.post).toBe(1);
  // The getter: read once, by the memory store's size estimate of the entry; never by the settle step.
  expect([lazyRuns, getterReads]).toEqual([0, 1]);
});

it('a PUBLIC field with sessions whose value holds promises: a joiner of another session gets the value', async () => {
  const gate = deferred<void>();
  const { schema, cache } = setup(
    {
      post: async () => {
        await gate.promise;
        return { id: '1', title: Promise.resolve('t') };
      },
    },
    { sessionId: (ctx: { user: string }) => ctx.user },
  );
  const source = '{ post { id title } }';
  const a = run(schema, source, { ...herdcacheContext({ cache }), user: 'alice' });
  const b = run(schema, source, { ...herdcacheContext({ cache }), user: 'bob' });
  gate.resolve();
  for (const result of await Promise.all([a, b])) {
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ post: { id: '1', title: 't' } });
  }
});

it('a promise no query selects that never settles: the field is answered after SETTLE_WAIT_MS, not cached', async () => {
  jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
  try {
    const { schema, calls } = setup({ post: () => ({ id: '1', stream: new Promise(() => undefined) }) });
    for (let i = 1; i <= 2; i++) {
      let answered = false;
      const result = run(schema, '{ post { id } }').finally(() => (answered = true));
      await flush();
      jest.advanceTimersByTime(SETTLE_WAIT_MS - 1);
      await flush();
      expect(answered).toBe(false);
      jest.advanceTimersByTime(1);
      expect(summary(await result)).toEqual({ data: { post: { id: '1' } }, errors: undefined });
      expect(calls.post).toBe(i); // not cached
    }
  } finally {
    jest.useRealTimers();
  }
});

it("its settled promises are written as their values by redisStore's codec, and measured as them", async () => {
  const value = {
    id: '1',
    title: Promise.resolve('Hello'),
    author: Promise.resolve({ name: Promise.resolve('Ann') }),
    big: Promise.resolve(Array.from({ length: 10_000 }, (_, i) => `row ${i}`)),
  };
  expect(await settleValue(value)).toBe(value);
  const written = jsonCodec.encode({ value, freshUntil: Date.now() + 1000, staleUntil: Date.now() + 1000 });
  const read = jsonCodec.decode(written).value as Record<string, unknown>;
  expect({ ...read, big: (read.big as unknown[]).length }).toEqual({
    id: '1',
    title: 'Hello',
    author: { name: 'Ann' },
    big: 10_000,
  });
  expect(valueSize(value)).toBeGreaterThan(100_000); // the rows, not an empty object
});

it("a settled promise's value with toJSON (a Date, a money type) is written as JSON writes it", async () => {
  const at = new Date('2024-01-02T03:04:05.000Z');
  const value = { at: Promise.resolve(at), price: Promise.resolve({ cents: 1234, toJSON: () => '12.34 EUR' }) };
  await settleValue(value);
  const written = jsonCodec.encode({ value, freshUntil: Date.now() + 1000, staleUntil: Date.now() + 1000 });
  expect(jsonCodec.decode(written).value).toEqual({ at: '2024-01-02T03:04:05.000Z', price: '12.34 EUR' });
});

it('a promise in what another resolved to, rejecting while a slower one is awaited: handled (no unhandled rejection)', async () => {
  // In a process of its own: the test runner's own handling of rejections does not see this one.
  const script = `
    const { settleValue } = require(${JSON.stringify(require.resolve('../../src/graphql/settle'))});
    process.on('unhandledRejection', (reason) => { console.log('UNHANDLED ' + reason.message); });
    let release; const slow = new Promise((resolve) => (release = resolve));
    let fail; const failing = new Promise((_, reject) => (fail = reject));
    const value = { slow, author: Promise.resolve({ name: failing }) };
    settleValue(value).then(() => console.log('cached'), (error) => console.log('not cached: ' + error.name));
    setTimeout(() => fail(new Error('no name')), 20); // while slow is still awaited
    setTimeout(() => release('done'), 100);
  `;
  const { stdout } = await execFileAsync(process.execPath, ['--import', 'tsx', '-e', script]);
  expect(stdout.trim().split('\n')).toEqual(['not cached: Partial']);
});

it('the wait is SETTLE_WAIT_MS for the whole value, not per level of promises', async () => {
  jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
  try {
    const later = <T>(ms: number, value: () => T) =>
      new Promise<T>((resolve) => setTimeout(() => resolve(value()), ms));
    const step = (SETTLE_WAIT_MS * 3) / 4;
    // Each level's promise is made when the one above resolves, 3/4 of the wait apart.
    const value = { a: later(step, () => ({ b: later(step, () => ({ c: later(step, () => 'deep') })) })) };
    let outcome: unknown = 'pending';
    void settleValue(value).then(
      () => (outcome = 'cached'),
      (error: unknown) => (outcome = error instanceof Partial ? 'partial' : error),
    );
    // Past the one wait (with a step of slack), well before a wait per level would end (1.75 of it).
    for (let t = 0; t < SETTLE_WAIT_MS + 100; t += 50) {
      jest.advanceTimersByTime(50);
      await flush();
    }
    expect(outcome).toBe('partial'); // served as it is, not cached
  } finally {
    jest.useRealTimers();
  }
});

describe('settleValue', () => {
  it('returns values without promises or Errors as they are; class instances are not looked into', async () => {
    const value = { a: 1, b: { c: [1, 2, { d: 'x' }] } };
    expect(await settleValue(value)).toBe(value);
    const instance = new (class Row {
      lazy = Promise.reject(new Error('not looked into'));
    })();
    instance.lazy.catch(() => undefined);
    expect(await settleValue(instance)).toBe(instance);
  });

  it('a getter that throws is not called (an unselected one must not fail the field)', async () => {
    const value = {
      id: '1',
      get title(): string {
        throw new Error('not loaded');
      },
    };
    expect(await settleValue(value)).toBe(value);
  });

  it('a cycle is looked at once', async () => {
    const cyclic: Record<string, unknown> = { p: Promise.resolve(1) };
    cyclic.self = cyclic;
    expect(await settleValue(cyclic)).toBe(cyclic);
    cyclic.bad = new Error('x');
    expect(partialOrThrow(await settleValue(cyclic).catch((error: unknown) => error))).toBe(cyclic);
  });

  it('a failed part: a Partial carrying the value as it was, which partialOrThrow answers with', async () => {
    const value = { ok: 1, bad: Promise.reject(new Error('no')) };
    const failure = await settleValue(value).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Partial);
    expect(partialOrThrow(failure)).toBe(value);
    expect(() => partialOrThrow(new Error('other'))).toThrow('other');
  });
});

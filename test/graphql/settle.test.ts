/**
 * A @cached field whose value holds promises or Errors in its properties (src/graphql/settle.ts):
 * graphql-js reports each failed one at its own path; with the cache the answer is the same, a
 * failed value is never cached (it was, and its error served to every caller until the ttl), and a
 * value whose promises all resolve is cached with their values (no promise in the store: Redis
 * would hold `{}`).
 */
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { cachedDirectiveTransformer, cachedFieldKey } from '../../src/graphql';
import { Partial, partialOrThrow, settleValue } from '../../src/graphql/settle';
import { makeSchema, run } from './fixtures';

const typeDefs = `
  type Query { post: Post @cached(ttl: 60) }
  type Post { id: ID!, title: String, author: Author }
  type Author { name: String, tags: [String] }
`;

type Post = Record<string, unknown>;

function setup(post: () => Post) {
  const store = memoryStore();
  const cache = createCache({ store });
  let calls = 0;
  const schema = makeSchema(typeDefs, { Query: { post: () => (calls++, post()) } });
  cachedDirectiveTransformer(schema, { cache });
  const stored = () => store.getSync(cachedFieldKey('Query.post', {}))?.value;
  return { schema, calls: () => calls, stored };
}

const summary = (result: Awaited<ReturnType<typeof run>>) => ({
  data: result.data,
  errors: result.errors?.map((error) => ({ message: error.message, path: error.path })),
});

const uncached = async (post: () => Post, source: string) =>
  summary(await run(makeSchema(typeDefs, { Query: { post } }), source));

describe.each([
  ['a rejected promise', () => Promise.reject(new Error('db down'))],
  ['a returned Error', () => new Error('db down')],
])('a property holding %s', (_name, failure) => {
  it('is answered as without a cache (the error at its path, the rest kept), and not cached', async () => {
    const failing = (): Post => ({ id: '1', title: failure(), author: { name: 'Ann', tags: ['a'] } });
    const source = '{ post { id title author { name } } }';
    const expected = await uncached(failing, source);
    expect(expected.errors).toEqual([{ message: 'db down', path: ['post', 'title'] }]);
    let healthy = false;
    const { schema, calls, stored } = setup(() =>
      healthy ? { id: '1', title: 'Hello', author: { name: 'Ann' } } : failing(),
    );
    expect(summary(await run(schema, source))).toEqual(expected);
    expect(summary(await run(schema, source))).toEqual(expected);
    expect(calls()).toBe(2); // not cached: the resolver ran again
    expect(stored()).toBeUndefined();
    healthy = true;
    expect((await run(schema, source)).errors).toBeUndefined();
    await run(schema, source);
    expect(calls()).toBe(3); // cached once healthy
  });

  it('deeper (an array in a nested object): the same', async () => {
    const failing = (): Post => ({ id: '1', author: { name: 'Ann', tags: ['a', failure()] } });
    const source = '{ post { author { tags } } }';
    const expected = await uncached(failing, source);
    expect(expected.errors?.[0]?.path).toEqual(['post', 'author', 'tags', 1]);
    const { schema, calls } = setup(failing);
    expect(summary(await run(schema, source))).toEqual(expected);
    await run(schema, source);
    expect(calls()).toBe(2);
  });
});

it('promises that resolve are cached as their values; the resolver’s object is left as it was', async () => {
  const returned: Post[] = [];
  const { schema, calls, stored } = setup(() => {
    const post = { id: '1', title: Promise.resolve('Hello'), author: { name: Promise.resolve('Ann'), tags: ['x'] } };
    returned.push(post);
    return post;
  });
  const source = '{ post { id title author { name tags } } }';
  const first = await run(schema, source);
  expect(first.errors).toBeUndefined();
  expect(first.data).toEqual({ post: { id: '1', title: 'Hello', author: { name: 'Ann', tags: ['x'] } } });
  expect(stored()).toEqual({ id: '1', title: 'Hello', author: { name: 'Ann', tags: ['x'] } });
  expect(JSON.stringify(stored())).toBe('{"id":"1","title":"Hello","author":{"name":"Ann","tags":["x"]}}');
  expect(returned[0]!.title).toBeInstanceOf(Promise); // not changed in place
  expect((await run(schema, source)).data).toEqual(first.data);
  expect(calls()).toBe(1);
});

describe('settleValue', () => {
  it('leaves values without promises or Errors as they are (the same object)', async () => {
    const value = { a: 1, b: { c: [1, 2, { d: 'x' }] } };
    expect(await settleValue(value)).toBe(value);
    const instance = new (class Row {
      lazy = Promise.reject(new Error('not looked into'));
    })();
    instance.lazy.catch(() => undefined);
    expect(await settleValue(instance)).toBe(instance); // a class instance is not looked into
  });

  it('a cycle, a shared node, an own __proto__ key and a null-prototype object', async () => {
    // Without promises: as it is. With them: answered as it is, not cached (a Partial).
    const shared: Record<string, unknown> = { p: 1 };
    const cyclic: Record<string, unknown> = { shared, again: shared };
    cyclic.self = cyclic;
    expect(await settleValue(cyclic)).toBe(cyclic);
    shared.p = Promise.resolve(1);
    const failure = await settleValue(cyclic).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Partial);
    expect(partialOrThrow(failure)).toBe(cyclic);
    const hostile = JSON.parse('{"__proto__": {"p": 1}, "q": 2}') as Record<string, unknown>;
    (hostile as { late?: unknown }).late = Promise.resolve(3);
    const copy = (await settleValue(hostile)) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__', 'q', 'late']);
    expect(copy.late).toBe(3);
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { x: Promise.resolve('y') });
    const bareCopy = (await settleValue(bare)) as Record<string, unknown>;
    expect(Object.getPrototypeOf(bareCopy)).toBeNull();
    expect(bareCopy.x).toBe('y');
  });

  it('a failed part: a Partial carrying the value as it was, which partialOrThrow answers with', async () => {
    const value = { ok: 1, bad: Promise.reject(new Error('no')) };
    const failure = await settleValue(value).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Partial);
    expect(partialOrThrow(failure)).toBe(value);
    expect(() => partialOrThrow(new Error('other'))).toThrow('other');
  });
});

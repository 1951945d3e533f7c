/**
 * Hostile keys: whatever string an app passes to getOrCompute (often built from client input,
 * `${lang}:${slug}`) or a loader, it never reaches a @cached field's entry, so never another
 * session's PRIVATE value, and never plants one. (getOrCompute(cachedFieldKey('Query.secret',
 * { session: 'alice' })) used to return Alice's value, and with Bob's session planted "poison".)
 */
import { createCache } from '../../src/core/cache';
import { HerdcacheError } from '../../src/core/errors';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { cachedFieldKey } from '../../src/graphql/keys';
import { herdcacheContext } from '../../src/graphql/request';
import { makeSchema, run } from '../graphql/fixtures';

function secretSchema() {
  const cache = createCache();
  const schema = makeSchema('type Query { secret: String @cached(ttl: 60, scope: PRIVATE) }', {
    Query: { secret: (_p, _a, context: { user: string }) => `secret of ${context.user}` },
  });
  cachedDirectiveTransformer(schema, { cache, sessionId: (context: { user: string }) => context.user });
  const as = (user: string) => ({ ...herdcacheContext({ cache }), user });
  return { cache, schema, as };
}

it("getOrCompute cannot read another session's PRIVATE entry, nor plant one", async () => {
  const { cache, schema, as } = secretSchema();
  expect((await run(schema, '{ secret }', as('alice'))).data).toEqual({ secret: 'secret of alice' });
  const fill = jest.fn(() => 'poison');
  const read = cache.getOrCompute(cachedFieldKey('Query.secret', { session: 'alice' }), fill);
  await expect(read).rejects.toMatchObject({
    code: 'E_INVALID_KEY',
    message: expect.stringMatching(/must not start with U\+0000/),
  });
  await expect(
    cache.getOrCompute(cachedFieldKey('Query.secret', { session: 'bob' }), fill, { ttl: 60_000 }),
  ).rejects.toBeInstanceOf(HerdcacheError);
  // Through a request scope too, even after the field was answered in that request (its memo holds it).
  const context = as('bob');
  expect((await run(schema, '{ secret }', context)).data).toEqual({ secret: 'secret of bob' });
  await expect(
    context.scope.getOrCompute(cachedFieldKey('Query.secret', { session: 'bob' }), fill),
  ).rejects.toMatchObject({ code: 'E_INVALID_KEY' });
  expect(fill).not.toHaveBeenCalled();
  expect((await run(schema, '{ secret }', as('bob'))).data).toEqual({ secret: 'secret of bob' });
});

it('no loader name or loader key reaches the field namespace', async () => {
  const { cache, schema, as } = secretSchema();
  await run(schema, '{ secret }', as('alice'));
  expect(() => cache.loader({ name: '\u0000field\u0000gql', batch: async (keys: readonly string[]) => keys })).toThrow(
    /option "name"/,
  );
  expect(() => cache.loader({ name: '\u0000', batch: async (keys: readonly string[]) => keys })).toThrow(
    /not starting with U\+0000/,
  );
  // Loader keys are `name:key` with a name that cannot start with U+0000: a key spelling the
  // field's key lands in the loader's own space.
  const batch = jest.fn(async (keys: readonly string[]) => keys.map(() => 'from the loader'));
  const gql = cache.loader({ name: 'gql', batch, ttl: 60_000 });
  const spelled = cachedFieldKey('Query.secret', { session: 'alice' });
  expect(await gql.load(spelled)).toBe('from the loader');
  expect(await gql.load(spelled.slice('\u0000field\u0000gql:'.length))).toBe('from the loader');
  expect(batch).toHaveBeenCalledTimes(2);
  expect((await run(schema, '{ secret }', as('alice'))).data).toEqual({ secret: 'secret of alice' });
});

it('raw keys keep working, and invalidate() still takes the keys cachedFieldKey names', async () => {
  const { cache, schema, as } = secretSchema();
  expect(await cache.getOrCompute('fr:\u0000field\u0000', () => 'raw', { ttl: 60_000 })).toBe('raw');
  expect(await cache.getOrCompute('fr:\u0000field\u0000', () => 'again', { ttl: 60_000 })).toBe('raw');
  let n = 0;
  const counting = makeSchema('type Query { count: Int @cached(ttl: 60) }', { Query: { count: () => ++n } });
  cachedDirectiveTransformer(counting, { cache });
  await run(counting, '{ count }');
  await cache.invalidate(cachedFieldKey('Query.count'));
  expect((await run(counting, '{ count }')).data).toEqual({ count: 2 });
  expect((await run(schema, '{ secret }', as('carol'))).data).toEqual({ secret: 'secret of carol' });
});

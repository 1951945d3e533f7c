import Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { cachedFieldKey } from '../../src/graphql/keys';
import { redisStore } from '../../src/redis/redis-store';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { makeSchema, run } from './fixtures';

const typeDefs = `type Query { greeting: String @cached(ttl: 60)  names: [String] @cached(ttl: 60) }`;

function schemaFor(cache: ReturnType<typeof createCache>) {
  let calls = 0;
  const schema = makeSchema(typeDefs, {
    Query: {
      // graphql-js treats a returned Error exactly like a thrown one: a field error, not a value.
      greeting: () => (++calls === 1 ? new Error('backend down') : 'hello'),
      names: () => (calls++ === 0 ? ['a', new Error('b failed')] : ['a', 'b']),
    },
  });
  cachedDirectiveTransformer(schema, { cache });
  return { schema, calls: () => calls };
}

test('memory store: a resolver that returns an Error has it cached and served to every later request', async () => {
  const cache = createCache();
  const { schema, calls } = schemaFor(cache);
  const first = await run(schema, '{ greeting }');
  expect(first.errors?.[0]?.message).toBe('backend down');
  const second = await run(schema, '{ greeting }');
  expect(calls()).toBe(2); // errors are never cached: the next caller retries
  expect(second.data).toEqual({ greeting: 'hello' });
});

test('memory store: an Error item inside a returned list is cached too', async () => {
  const cache = createCache();
  const { schema } = schemaFor(cache);
  const first = await run(schema, '{ names }');
  expect(first.errors?.[0]?.message).toBe('b failed');
  const second = await run(schema, '{ names }');
  expect(second.errors).toBeUndefined();
  expect(second.data).toEqual({ names: ['a', 'b'] });
});

describe('redis store', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url);
    await new Promise((r) => client.once('ready', r));
  });
  afterAll(async () => {
    client.disconnect();
    await server.stop();
  });

  test('a returned Error is stored as JSON "{}" and later served as a value (error altered)', async () => {
    const cache = createCache({ store: redisStore({ client, prefix: 'derr:' }) });
    const { schema } = schemaFor(cache);
    await run(schema, '{ greeting }');
    const raw = await client.get(`derr:{${cachedFieldKey('Query.greeting')}}`);
    expect(raw).toBeNull(); // nothing should have been written for a failed field
  });

  test('…and the next request gets a different error than the resolver raised', async () => {
    const cache = createCache({ store: redisStore({ client, prefix: 'derr2:' }) });
    const { schema } = schemaFor(cache);
    await run(schema, '{ greeting }');
    const second = await run(schema, '{ greeting }');
    expect(second.data).toEqual({ greeting: 'hello' });
  });
});

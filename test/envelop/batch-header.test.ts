/**
 * Yoga 5 with batching: the response layer's Cache-Control header for a batch is the strictest of
 * its operations'. An operation that never reaches its execution (a syntax or validation error, an
 * unknown operation name, a subscription, a malformed entry) has a result that is never cacheable:
 * a review found such batches sent `max-age=60, public` (the header left them out).
 */
import { buildSchema } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';

const schema = buildSchema(`
  directive @cacheControl(maxAge: Int) on FIELD_DEFINITION
  type Query { a: String @cacheControl(maxAge: 60), b: String @cacheControl(maxAge: 30) }
  type Subscription { tick: Int }
`);
schema.getQueryType()!.getFields().a!.resolve = () => 'A';
schema.getQueryType()!.getFields().b!.resolve = () => 'B';

const yoga = createYoga({
  schema,
  logging: false,
  batching: true,
  plugins: [useHerdcache({ cache: createCache(), extensions: false, responseCache: true })],
});

async function headerOf(batch: unknown): Promise<string | null> {
  const response = await yoga.fetch('http://localhost/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(batch),
  });
  await response.text();
  return response.headers.get('cache-control');
}

it('a batch of cacheable queries: the strictest of their policies', async () => {
  expect(await headerOf([{ query: '{ a }' }, { query: '{ b }' }])).toBe('max-age=30, public');
});

it.each<[string, unknown]>([
  ['a validation error', { query: '{ nope }' }],
  ['a syntax error', { query: '{' }],
  ['an unknown operation name', { query: 'query Q { a }', operationName: 'Other' }],
  ['a subscription', { query: 'subscription { tick }' }],
  ['an entry that is no object', 5],
])('a batch holding %s beside a cacheable query: no-store', async (_what, entry) => {
  expect(await headerOf([{ query: '{ a }' }, entry])).toBe('no-store');
});

it('a plugin before this one turning the request away with an error status (APQ: PersistedQueryNotFound, 404): no-store', async () => {
  // As @graphql-yoga/plugin-apq answers a hash it does not know: thrown from onParams, before any
  // operation is handled (a review found such 404s and 400s sent with no Cache-Control at all).
  const { createGraphQLError } = await import('graphql-yoga');
  const turnedAway = createYoga({
    schema,
    logging: false,
    plugins: [
      {
        onParams({ params }: { params: { query?: string } }) {
          if (params.query === undefined)
            throw createGraphQLError('PersistedQueryNotFound', { extensions: { http: { status: 404 } } });
        },
      },
      useHerdcache({ cache: createCache(), extensions: false, responseCache: true }),
    ],
  });
  const ask = async (body: unknown) => {
    const response = await turnedAway.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    await response.text();
    return [response.status, response.headers.get('cache-control')];
  };
  expect(await ask({ extensions: { persistedQuery: { version: 1, sha256Hash: 'ab' } } })).toEqual([404, 'no-store']);
  expect(await ask({ query: '{ a }' })).toEqual([200, 'max-age=60, public']);
});

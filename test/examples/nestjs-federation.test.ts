/**
 * examples/nestjs/federation.ts: a NestJS subgraph (ApolloFederationDriver) with `@cached` on its
 * entity: 10 concurrent `_entities` requests of 20 representations over 5 products, over HTTP
 * (127.0.0.1, an ephemeral port) → 5 reference resolutions (one per product, not one per
 * representation: 200), and the subgraph SDL served to the gateway carries @key and @cached.
 */
import { createCache } from '../../src/core/cache';

interface FederationExample {
  Catalogue: new () => { calls: { resolveReference: number } };
  subgraphModule(cache: ReturnType<typeof createCache>, catalogue: object): new () => object;
}
// Loaded with require: its decorators are type-checked by test/examples/tsconfig.nestjs.json.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const example = require('../../examples/nestjs/federation') as FederationExample;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { NestFactory } = require('@nestjs/core') as {
  NestFactory: { create(module: unknown, options: object): Promise<any> };
};

const ENTITIES = 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { id name price } } }';
const representations = Array.from({ length: 20 }, (_, i) => ({ __typename: 'Product', id: String(i % 5) }));

async function post(url: string, body: object): Promise<any> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

it('NestJS subgraph: 10 concurrent _entities requests × 20 representations over 5 products → 5 @ResolveReference calls', async () => {
  const cache = createCache();
  const catalogue = new example.Catalogue();
  const app = await NestFactory.create(example.subgraphModule(cache, catalogue), { logger: ['error'] });
  try {
    await app.listen(0, '127.0.0.1');
    const url = `http://127.0.0.1:${app.getHttpServer().address().port}/graphql`;
    const sdl = await post(url, { query: '{ _service { sdl } }' });
    expect(sdl.data._service.sdl).toMatch(
      /type Product\s+@key\(fields: "id"\)\s+@cached\(ttl: 60, tags: \["Product:\{id\}"\]\)/,
    );
    const results = await Promise.all(
      Array.from({ length: 10 }, () => post(url, { query: ENTITIES, variables: { r: representations } })),
    );
    for (const result of results) {
      expect(result.errors).toBeUndefined();
      expect(result.data._entities).toHaveLength(20);
      expect(result.data._entities[7]).toEqual({ id: '2', name: 'product 2', price: 20 });
    }
    expect(catalogue.calls.resolveReference).toBe(5);
  } finally {
    await app.close();
  }
});

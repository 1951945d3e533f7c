/**
 * Entity caching through a real @apollo/gateway over HTTP: @cached on `Product @key(fields: "id")`
 * makes its __resolveReference run once per product however many gateway queries reference it at
 * once, and @invalidates on a products mutation makes the next gateway query fresh.
 */
import { createCache } from '../../../src/core/cache';
import { PRODUCTS, REVIEWS, REVIEWS_QUERY, post, startFederation } from './fixtures';

function expectReviews(result: { data?: any; errors?: unknown[] }, names: (id: string) => string): void {
  expect(result.errors).toBeUndefined();
  expect(result.data.reviews).toHaveLength(REVIEWS);
  for (const review of result.data.reviews) {
    const id = String(Number(review.id) % PRODUCTS);
    expect(review.product).toEqual({ id, name: names(id), price: 10 * Number(id) });
  }
}

describe('Federation entities through @apollo/gateway', () => {
  it(`100 concurrent queries × ${REVIEWS} references over ${PRODUCTS} products: ${PRODUCTS} __resolveReference calls`, async () => {
    const cache = createCache();
    const federation = await startFederation(cache);
    try {
      const results = await Promise.all(Array.from({ length: 100 }, () => post(federation.gatewayUrl, REVIEWS_QUERY)));
      for (const result of results) expectReviews(result, (id) => `product ${id}`);
      expect(federation.products.calls.resolveReference).toBe(PRODUCTS);
      expect(Object.values(federation.products.calls.byId)).toEqual(Array(PRODUCTS).fill(1));
      expect(cache.metrics().sources['Product.__resolveReference']).toMatchObject({
        misses: PRODUCTS,
        fills: PRODUCTS,
      });
    } finally {
      await federation.stop();
    }
  });

  it('without @cached on the entity every representation is resolved (the control: 10 queries → 200 calls)', async () => {
    const cache = createCache();
    const federation = await startFederation(cache, '');
    try {
      const results = await Promise.all(Array.from({ length: 10 }, () => post(federation.gatewayUrl, REVIEWS_QUERY)));
      for (const result of results) expectReviews(result, (id) => `product ${id}`);
      expect(federation.products.calls.resolveReference).toBe(10 * REVIEWS);
    } finally {
      await federation.stop();
    }
  });

  it('a mutation with @invalidates(tags: ["Product:{args.id}"]): the next gateway query is fresh, the other products stay cached', async () => {
    const cache = createCache();
    const federation = await startFederation(cache);
    try {
      expectReviews(await post(federation.gatewayUrl, REVIEWS_QUERY), (id) => `product ${id}`);
      expectReviews(await post(federation.gatewayUrl, REVIEWS_QUERY), (id) => `product ${id}`);
      expect(federation.products.calls.resolveReference).toBe(PRODUCTS);
      const renamed = await post(
        federation.gatewayUrl,
        'mutation { renameProduct(id: "3", name: "renamed") { id name } }',
      );
      expect(renamed).toEqual({ data: { renameProduct: { id: '3', name: 'renamed' } } });
      expectReviews(await post(federation.gatewayUrl, REVIEWS_QUERY), (id) =>
        id === '3' ? 'renamed' : `product ${id}`,
      );
      expect(federation.products.calls.resolveReference).toBe(PRODUCTS + 1);
      expect(federation.products.calls.byId['3']).toBe(2);
    } finally {
      await federation.stop();
    }
  });
});

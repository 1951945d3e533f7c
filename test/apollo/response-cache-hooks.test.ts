/** The response layer through the cache's hooks: lookups are loads of the source `response`, the execution its fill. */
import { ApolloServer } from '@apollo/server';
import { herdcachePlugin } from '../../src/apollo/plugin';
import { responseFixture } from '../graphql/response-fixture';

it('hooks see response lookups under the source "response": a miss and its fill, then a hit', async () => {
  const f = responseFixture();
  const seen: string[] = [];
  f.cache.observe({
    onMiss: (_key, source) => void seen.push(`miss ${source}`),
    onHit: (_key, source) => void seen.push(`hit ${source}`),
    onFill: (_key, source) => void seen.push(`fill ${source}`),
  });
  const server = new ApolloServer({
    schema: f.schema,
    plugins: [herdcachePlugin({ cache: f.cache, responseCache: true })],
  });
  await server.start();
  try {
    for (let i = 0; i < 2; i++) {
      const response = await server.executeOperation({ query: '{ products { id name } }' });
      expect(response.body.kind === 'single' && response.body.singleResult.data).toEqual({
        products: [{ id: 'p1', name: 'Pen' }],
      });
    }
    expect(seen.filter((s) => s.endsWith(' response'))).toEqual(['miss response', 'fill response', 'hit response']);
    expect(f.calls.products).toBe(1);
  } finally {
    await server.stop();
  }
});

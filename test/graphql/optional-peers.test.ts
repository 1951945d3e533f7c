/** graphql, @apollo/server and prom-client are optional peers: herdcache's modules load without them. */
const PEERS = ['graphql', '@apollo/server', 'prom-client'];

describe('optional peers', () => {
  it('the GraphQL, Apollo and Prometheus modules load and build their objects without the peers', () => {
    jest.isolateModules(() => {
      for (const peer of PEERS) {
        jest.doMock(peer, () => {
          throw new Error(`${peer} was required at load time`);
        });
      }
      /* eslint-disable @typescript-eslint/no-require-imports */
      const graphqlLayer = require('../../src/graphql') as typeof import('../../src/graphql');
      const { herdcachePlugin } = require('../../src/apollo/plugin') as typeof import('../../src/apollo/plugin');
      require('../../src/prometheus/metrics');
      const { createCache } = require('../../src/core/cache') as typeof import('../../src/core/cache');
      const cache = createCache();
      expect(typeof graphqlLayer.cachedDirectiveTypeDefs).toBe('string');
      expect(graphqlLayer.requestScope(graphqlLayer.herdcacheContext({ cache }))).toBeDefined();
      expect(typeof herdcachePlugin({ cache }).requestDidStart).toBe('function');
      for (const peer of PEERS) jest.dontMock(peer);
    });
  });
});

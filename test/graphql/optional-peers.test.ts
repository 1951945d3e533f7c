/**
 * graphql, @apollo/server, @envelop/core, graphql-yoga and prom-client are optional peers: herdcache's
 * modules load without them. The one exception is the herdcache/graphql entry itself, which exports
 * GraphQLDirective objects (./code-first) and so loads graphql, its own peer; the Apollo, Envelop and
 * Prometheus entries import the GraphQL layer's modules, not that entry, and still load without it.
 */
const PEERS = ['graphql', '@apollo/server', '@envelop/core', 'graphql-yoga', 'prom-client'];

describe('optional peers', () => {
  it('the GraphQL, Apollo, Envelop and Prometheus modules load and build their objects without the peers', () => {
    jest.isolateModules(() => {
      for (const peer of PEERS) {
        jest.doMock(peer, () => {
          throw new Error(`${peer} was required at load time`);
        });
      }
      /* eslint-disable @typescript-eslint/no-require-imports */
      const graphqlLayer = {
        ...(require('../../src/graphql/sdl') as typeof import('../../src/graphql/sdl')),
        ...(require('../../src/graphql/request') as typeof import('../../src/graphql/request')),
      };
      require('../../src/graphql/directive');
      const { herdcachePlugin } = require('../../src/apollo/plugin') as typeof import('../../src/apollo/plugin');
      const { useHerdcache } = require('../../src/envelop') as typeof import('../../src/envelop');
      require('../../src/prometheus');
      const { createCache } = require('../../src/core/cache') as typeof import('../../src/core/cache');
      const cache = createCache();
      expect(typeof graphqlLayer.cachedDirectiveTypeDefs).toBe('string');
      expect(graphqlLayer.requestScope(graphqlLayer.herdcacheContext({ cache }))).toBeDefined();
      expect(typeof herdcachePlugin({ cache }).requestDidStart).toBe('function');
      expect(typeof useHerdcache({ cache }).onExecute).toBe('function');
      for (const peer of PEERS) jest.dontMock(peer);
    });
  });

  it('herdcache/graphql itself loads graphql (for the GraphQLDirective objects), and only that entry', () => {
    jest.isolateModules(() => {
      jest.doMock('graphql', () => {
        throw new Error('graphql was required at load time');
      });
      expect(() => require('../../src/graphql')).toThrow('graphql was required at load time');
      jest.dontMock('graphql');
    });
  });
});

/**
 * Two subgraphs of @apollo/subgraph 2.x and a real @apollo/gateway in front of them, over HTTP on
 * 127.0.0.1 (ephemeral ports), for entity caching: `products` owns `Product @key(fields: "id")`
 * with a type-level @cached; `reviews` returns reviews that reference products, so a gateway query
 * for reviews sends the products subgraph one `_entities` request with one representation per review.
 */
import { ApolloGateway, IntrospectAndCompose } from '@apollo/gateway';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginCacheControl } from '@apollo/server/plugin/cacheControl';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import type { Cache } from '../../../src/core/cache';
import {
  type CachedDirectiveOptions,
  cachedDirectiveTransformer,
  cachedDirectiveTypeDefs,
  herdcacheContext,
} from '../../../src/graphql';
import { herdcachePlugin } from '../../../src/apollo';

export const PRODUCTS = 5;
export const REVIEWS = 20;

export function productsSdl(entityDirective: string): string {
  return `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
  ${cachedDirectiveTypeDefs}
  type Product @key(fields: "id") ${entityDirective} { id: ID!, name: String!, price: Int! }
  type Query { product(id: ID!): Product }
  type Mutation { renameProduct(id: ID!, name: String!): Product @invalidates(tags: ["Product:{args.id}"]) }
`;
}

/** The products subgraph's schema, transformed; `calls.resolveReference` counts reference resolutions per product id. */
export function productsSchema(
  cache: Cache,
  entityDirective = '@cached(ttl: 60, tags: ["Product:{id}"])',
  options: Omit<CachedDirectiveOptions, 'cache'> = {},
) {
  const names = new Map<string, string>(Array.from({ length: PRODUCTS }, (_, i) => [String(i), `product ${i}`]));
  const calls = { resolveReference: 0, byId: {} as Record<string, number> };
  const schema = buildSubgraphSchema({
    typeDefs: parse(productsSdl(entityDirective)),
    resolvers: {
      Product: {
        __resolveReference: async (reference: { id: string }) => {
          calls.resolveReference++;
          calls.byId[reference.id] = (calls.byId[reference.id] ?? 0) + 1;
          await new Promise((resolve) => setImmediate(resolve)); // a database round trip
          return { id: reference.id, name: names.get(reference.id), price: 10 * Number(reference.id) };
        },
      },
      Query: {
        product: (_p: unknown, { id }: { id: string }) => ({ id, name: names.get(id), price: 10 * Number(id) }),
      },
      Mutation: {
        renameProduct: (_p: unknown, { id, name }: { id: string; name: string }) => {
          names.set(id, name);
          return { id, name, price: 10 * Number(id) };
        },
      },
    } as never,
  });
  cachedDirectiveTransformer(schema, { cache, ...options });
  return { schema, calls, names };
}

const reviewsSdl = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
  type Review { id: ID!, product: Product! }
  type Product @key(fields: "id", resolvable: false) { id: ID! }
  type Query { reviews: [Review!]! }
`;

function reviewsSchema() {
  return buildSubgraphSchema({
    typeDefs: parse(reviewsSdl),
    resolvers: {
      Query: {
        reviews: () =>
          Array.from({ length: REVIEWS }, (_, i) => ({
            id: String(i),
            product: { __typename: 'Product', id: String(i % PRODUCTS) },
          })),
      },
    } as never,
  });
}

export interface Federation {
  gatewayUrl: string;
  products: ReturnType<typeof productsSchema>;
  stop(): Promise<void>;
}

/** Starts both subgraphs and the gateway (composition by introspecting the subgraphs over HTTP). */
export async function startFederation(
  cache: Cache,
  entityDirective?: string,
  gatewayPlugins: ApolloServerPlugin[] = [],
  /** Installs Apollo's cache-control plugin with this defaultMaxAge in both subgraphs (their responses then say max-age). */
  subgraphDefaultMaxAge?: number,
): Promise<Federation> {
  const hints =
    subgraphDefaultMaxAge === undefined
      ? []
      : [ApolloServerPluginCacheControl({ defaultMaxAge: subgraphDefaultMaxAge })];
  const products = productsSchema(cache, entityDirective);
  const productsServer = new ApolloServer({
    schema: products.schema,
    plugins: [herdcachePlugin({ cache }), ApolloServerPluginInlineTraceDisabled(), ...hints],
  });
  const reviewsServer = new ApolloServer({
    schema: reviewsSchema(),
    plugins: [ApolloServerPluginInlineTraceDisabled(), ...hints],
  });
  const servers: { stop(): Promise<void> }[] = [];
  try {
    const { url: productsUrl } = await startStandaloneServer(productsServer, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async () => herdcacheContext({ cache }),
    });
    servers.push(productsServer);
    const { url: reviewsUrl } = await startStandaloneServer(reviewsServer, { listen: { port: 0, host: '127.0.0.1' } });
    servers.push(reviewsServer);
    const gateway = new ApolloGateway({
      supergraphSdl: new IntrospectAndCompose({
        subgraphs: [
          { name: 'products', url: productsUrl },
          { name: 'reviews', url: reviewsUrl },
        ],
      }),
    });
    const gatewayServer = new ApolloServer({ gateway, plugins: gatewayPlugins });
    const { url: gatewayUrl } = await startStandaloneServer(gatewayServer, { listen: { port: 0, host: '127.0.0.1' } });
    servers.unshift(gatewayServer); // stopped first: it stops the gateway's polling too
    return {
      gatewayUrl,
      products,
      stop: async () => {
        for (const server of servers) await server.stop();
      },
    };
  } catch (error) {
    for (const server of servers) await server.stop();
    throw error;
  }
}

export async function post(url: string, query: string): Promise<{ data?: any; errors?: unknown[] }> {
  const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
  // A reused keep-alive socket the server closed as idle just as this request left resets before
  // the server read anything: send it again, once.
  const response = await fetch(url, init).catch((error: { cause?: { code?: string } }) => {
    if (error.cause?.code === 'ECONNRESET') return fetch(url, init);
    throw error;
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`HTTP ${response.status} for ${query}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as { data?: any; errors?: unknown[] };
}

export const REVIEWS_QUERY = '{ reviews { id product { id name price } } }';

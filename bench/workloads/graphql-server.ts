/**
 * The Apollo server of workload 6, run as a child process so the load generator (in the parent)
 * does not share its event loop. `HERDCACHE_BENCH_MODE` picks how `Item.detail` reaches the
 * database:
 *   uncached   — the resolver queries the database for each item;
 *   dataloader — a DataLoader per operation batches the 100 items into one query;
 *   cached     — the uncached resolver under `@cached(ttl: 60)` (herdcache's directive, the
 *                operation's scope from herdcacheContext(), and the Apollo plugin when it exists).
 *
 * The database: `DB_MS` per query and a pool of `POOL` connections (node-postgres' default size),
 * so a query waits for a free connection as it would on a real one; an unbounded pool would let
 * the uncached server pretend a database has infinite capacity.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import DataLoader from 'dataloader';
import { buildSchema, type GraphQLObjectType, type GraphQLSchema } from 'graphql';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createCache } from '../../src/core';
import type { Cache } from '../../src/core';
import { sleep } from '../lib/stats';

export type GraphqlMode = 'uncached' | 'dataloader' | 'cached';

export const ITEMS = 100;
const DB_MS = Number(process.env.HERDCACHE_BENCH_DB_MS ?? 10);
const POOL = 10;

/** src/graphql and src/apollo, loaded at run time: they are optional for the bench and its typecheck. */
interface GraphqlPieces {
  cachedDirectiveTypeDefs: string;
  cachedDirectiveTransformer(schema: GraphQLSchema, options: { cache: Cache }): GraphQLSchema;
  /** The operation's cache state for the context (request scope): src/graphql. */
  herdcacheContext(options: { cache: Cache }): object;
  /** The Apollo plugin, when src/apollo exists. */
  herdcachePlugin?(options: { cache: Cache; extensions?: boolean }): never;
}

const src = join(__dirname, '..', '..', 'src');

/** The directive and plugin, or why they cannot be used (the row is then skipped). */
export function loadGraphqlPieces(): GraphqlPieces | string {
  const directive = join(src, 'graphql', 'index.ts');
  const plugin = join(src, 'apollo', 'plugin.ts');
  if (!existsSync(directive)) return 'src/graphql does not exist yet';
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only if it exists (else the row is skipped)
    const g = require(directive.replace(/\.ts$/, '')) as Partial<GraphqlPieces>;
    if (
      typeof g.cachedDirectiveTransformer !== 'function' ||
      typeof g.cachedDirectiveTypeDefs !== 'string' ||
      typeof g.herdcacheContext !== 'function'
    ) {
      return 'src/graphql lacks cachedDirectiveTransformer, cachedDirectiveTypeDefs or herdcacheContext';
    }
    // The plugin only reports; the directive and the context helper do the caching.
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only if it exists
    const p = existsSync(plugin) ? (require(plugin.replace(/\.ts$/, '')) as Partial<GraphqlPieces>) : {};
    return {
      cachedDirectiveTypeDefs: g.cachedDirectiveTypeDefs,
      cachedDirectiveTransformer: g.cachedDirectiveTransformer,
      herdcacheContext: g.herdcacheContext,
      herdcachePlugin: typeof p.herdcachePlugin === 'function' ? p.herdcachePlugin : undefined,
    };
  } catch (error) {
    return `src/graphql does not load: ${(error as Error).message}`;
  }
}

/** A database with a connection pool: at most POOL queries run at once, the rest queue. */
class PooledDb {
  queries = 0;
  #busy = 0;
  readonly #queue: (() => void)[] = [];

  async query<T>(compute: () => T): Promise<T> {
    this.queries++;
    if (this.#busy >= POOL) await new Promise<void>((resolve) => this.#queue.push(resolve));
    else this.#busy++;
    try {
      await sleep(DB_MS);
      return compute();
    } finally {
      const next = this.#queue.shift();
      if (next !== undefined)
        next(); // hand the connection over
      else this.#busy--;
    }
  }
}

interface Detail {
  readonly id: string;
  readonly text: string;
}

const detailOf = (id: string): Detail => ({ id, text: `detail of ${id}` });

async function main(): Promise<void> {
  const mode = process.env.HERDCACHE_BENCH_MODE as GraphqlMode;
  const db = new PooledDb();
  const items = Array.from({ length: ITEMS }, (_, i) => ({ id: String(i + 1), name: `item ${i + 1}` }));
  const pieces = mode === 'cached' ? loadGraphqlPieces() : undefined;
  if (typeof pieces === 'string') throw new Error(pieces);

  const sdl = `
    type Query { items: [Item!]! }
    type Item { id: ID! name: String! detail: Detail! ${mode === 'cached' ? '@cached(ttl: 60)' : ''} }
    type Detail { id: ID! text: String! }
    ${pieces?.cachedDirectiveTypeDefs ?? ''}
  `;
  const schema = buildSchema(sdl);
  schema.getQueryType()!.getFields().items!.resolve = () => items;
  const detail = (schema.getType('Item') as GraphQLObjectType).getFields().detail!;
  type Context = { details?: DataLoader<string, Detail> };
  detail.resolve =
    mode === 'dataloader'
      ? (item: { id: string }, _args, context: Context) => context.details!.load(item.id)
      : (item: { id: string }) => db.query(() => detailOf(item.id));

  const cache = createCache();
  const server = new ApolloServer<Context>({
    schema: pieces === undefined ? schema : pieces.cachedDirectiveTransformer(schema, { cache }),
    plugins: pieces?.herdcachePlugin === undefined ? [] : [pieces.herdcachePlugin({ cache, extensions: false })],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async () =>
      mode === 'dataloader'
        ? { details: new DataLoader<string, Detail>((ids) => db.query(() => ids.map(detailOf))) }
        : pieces === undefined
          ? {}
          : { ...pieces.herdcacheContext({ cache }) },
  });
  process.on('message', (message: string) => {
    if (message === 'stats') process.send!({ queries: db.queries });
  });
  process.on('disconnect', () => void server.stop().then(() => process.exit(0)));
  process.send!({ url, plugin: pieces?.herdcachePlugin !== undefined });
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.send?.({ error: (error as Error).message });
    console.error('graphql-server:', error);
    process.exit(1);
  });
}

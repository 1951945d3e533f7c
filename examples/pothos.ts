/**
 * A code-first schema with Pothos (@pothos/core 4 and @pothos/plugin-directives 4): @cached and
 * @invalidates given as field options (`directives: { cached: { ttl: 60 } }`), the schema built with
 * herdcache's GraphQLDirective objects, then transformed; served by Apollo Server with the plugin.
 *
 *   npx tsx examples/pothos.ts        # GraphQL on http://127.0.0.1:$PORT/ (default 4000)
 *
 *   curl -s localhost:4000/ -H 'content-type: application/json' -d '{"query":"{ book(id: \"1\") { title rating } }"}'
 *
 * Run it twice within 60 s and the database is asked once: look at `extensions.cache` in the answer.
 */
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import SchemaBuilder from '@pothos/core';
import DirectivePlugin from '@pothos/plugin-directives';
import type { GraphQLSchema } from 'graphql';
import { type Cache, createCache } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
import { type CacheScope, cachedDirectiveTransformer, herdcacheContext, herdcacheDirectives } from 'herdcache/graphql';

/** The directives as Pothos types them (ttl and swr in seconds, as in SDL). */
type HerdcacheDirectiveTypes = {
  cached: {
    locations: 'FIELD_DEFINITION' | 'OBJECT';
    args: { ttl: number; swr?: number; scope?: CacheScope; tags?: string[] };
  };
  invalidates: { locations: 'FIELD_DEFINITION'; args: { tags: string[] } };
};

interface Book {
  id: string;
  title: string;
}

/** What the resolvers read; `calls` counts how often the database was asked. */
export function bookDatabase() {
  const books = new Map<string, Book>([
    ['1', { id: '1', title: 'The Left Hand of Darkness' }],
    ['2', { id: '2', title: 'Kindred' }],
  ]);
  const calls = { book: 0, rating: 0 };
  return {
    calls,
    async book(id: string): Promise<Book | null> {
      calls.book++;
      await new Promise((resolve) => setTimeout(resolve, 20)); // a slow query
      return books.get(id) ?? null;
    },
    async rating(id: string): Promise<number> {
      calls.rating++;
      return id.length + 3.5;
    },
    async retitle(id: string, title: string): Promise<Book | null> {
      const book = books.get(id);
      if (book === undefined) return null;
      book.title = title;
      return { ...book };
    },
  };
}

export function pothosSchema(cache: Cache, db: ReturnType<typeof bookDatabase>): GraphQLSchema {
  const builder = new SchemaBuilder<{ Directives: HerdcacheDirectiveTypes }>({ plugins: [DirectivePlugin] });
  const BookRef = builder.objectRef<Book>('Book').implement({
    fields: (t) => ({
      id: t.exposeID('id'),
      title: t.exposeString('title'),
      // Keyed by the parent's id: the ratings of a list leave in one store read.
      rating: t.float({ directives: { cached: { ttl: 60 } }, resolve: (book) => db.rating(book.id) }),
    }),
  });
  builder.queryType({
    fields: (t) => ({
      book: t.field({
        type: BookRef,
        nullable: true,
        args: { id: t.arg.id({ required: true }) },
        directives: { cached: { ttl: 60, swr: 30, tags: ['Book:{args.id}'] } },
        resolve: (_root, { id }) => db.book(String(id)),
      }),
    }),
  });
  builder.mutationType({
    fields: (t) => ({
      retitleBook: t.field({
        type: BookRef,
        nullable: true,
        args: { id: t.arg.id({ required: true }), title: t.arg.string({ required: true }) },
        directives: { invalidates: { tags: ['Book:{args.id}'] } },
        resolve: (_root, { id, title }) => db.retitle(String(id), title),
      }),
    }),
  });
  // The directive definitions go into the schema (Pothos' plugin also writes AST nodes from them).
  const schema = builder.toSchema({ directives: herdcacheDirectives });
  return cachedDirectiveTransformer(schema, { cache });
}

/** Starts the server; resolves with its URL and a stop function. */
export async function start(port = Number(process.env.PORT ?? 4000)) {
  const cache = createCache();
  const server = new ApolloServer({
    schema: pothosSchema(cache, bookDatabase()),
    plugins: [herdcachePlugin({ cache, extensions: true })],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port, host: process.env.HOST ?? '127.0.0.1' },
    context: async () => herdcacheContext({ cache }),
  });
  return { url, stop: () => server.stop() };
}

if (require.main === module) {
  start().then(
    ({ url }) => console.log(`GraphQL (Pothos) on ${url}`),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}

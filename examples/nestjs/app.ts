/**
 * NestJS 11 code-first with the Apollo driver (@nestjs/graphql 13, @nestjs/apollo 13): @cached and
 * @invalidates through `@Directive(...)`, the directive definitions through
 * `buildSchemaOptions.directives`, the transform through `transformSchema` (Nest calls it with the
 * resolvers already attached), the plugin and the per-operation context in the driver's options.
 *
 * Every GraphQL type is given as a function and every injection names its token; @nestjs/graphql's
 * @Args() still reads `design:paramtypes`, so compile with `emitDecoratorMetadata` (tsc, swc).
 */
import 'reflect-metadata';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Inject, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Args,
  Directive,
  Field,
  Float,
  GraphQLModule,
  ID,
  Mutation,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { type Cache, createCache } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
import { cachedDirectiveTransformer, herdcacheContext, herdcacheDirectives } from 'herdcache/graphql';

@ObjectType()
export class Book {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  title!: string;
}

/** What the resolvers read; `calls` counts how often the database was asked. */
export class BookDatabase {
  readonly calls = { book: 0, rating: 0 };
  readonly #books = new Map<string, Book>([
    ['1', { id: '1', title: 'The Dispossessed' }],
    ['2', { id: '2', title: 'Parable of the Sower' }],
  ]);

  async book(id: string): Promise<Book | null> {
    this.calls.book++;
    await new Promise((resolve) => setTimeout(resolve, 20)); // a slow query
    const book = this.#books.get(id);
    return book === undefined ? null : { ...book };
  }

  async rating(id: string): Promise<number> {
    this.calls.rating++;
    return id.length + 3.5;
  }

  async retitle(id: string, title: string): Promise<Book | null> {
    const book = this.#books.get(id);
    if (book === undefined) return null;
    book.title = title;
    return { ...book };
  }
}

export const DATABASE = Symbol('BookDatabase');
export const CACHE = Symbol('herdcache');

@Resolver(() => Book)
export class BookResolver {
  constructor(@Inject(DATABASE) private readonly db: BookDatabase) {}

  @Query(() => Book, { nullable: true })
  @Directive('@cached(ttl: 60, swr: 30, tags: ["Book:{args.id}"])')
  book(@Args('id', { type: () => ID }) id: string): Promise<Book | null> {
    return this.db.book(id);
  }

  // Keyed by the parent's id: the ratings of a list leave in one store read.
  @ResolveField(() => Float)
  @Directive('@cached(ttl: 60)')
  rating(@Parent() book: Book): Promise<number> {
    return this.db.rating(book.id);
  }

  @Mutation(() => Book, { nullable: true })
  @Directive('@invalidates(tags: ["Book:{args.id}"])')
  retitleBook(
    @Args('id', { type: () => ID }) id: string,
    @Args('title', { type: () => String }) title: string,
  ): Promise<Book | null> {
    return this.db.retitle(id, title);
  }
}

/** The application module, for a given cache and database (tests pass their own). */
export function appModule(cache: Cache, db: BookDatabase) {
  @Module({
    imports: [
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        buildSchemaOptions: { directives: [...herdcacheDirectives] },
        transformSchema: (schema) => cachedDirectiveTransformer(schema, { cache }),
        plugins: [herdcachePlugin({ cache, extensions: true })],
        context: () => herdcacheContext({ cache }),
        playground: false,
      }),
    ],
    providers: [BookResolver, { provide: DATABASE, useValue: db }, { provide: CACHE, useValue: cache }],
  })
  class AppModule {}
  return AppModule;
}

/** Starts the application on 127.0.0.1; resolves with its GraphQL URL and a stop function. */
export async function start(port = Number(process.env.PORT ?? 3000)) {
  const app = await NestFactory.create(appModule(createCache(), new BookDatabase()), { logger: ['error', 'warn'] });
  await app.listen(port, process.env.HOST ?? '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}/graphql`, stop: () => app.close() };
}

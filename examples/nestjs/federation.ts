/**
 * A NestJS 11 subgraph (Apollo Federation 2, @nestjs/apollo's ApolloFederationDriver) whose entity
 * `Product` carries `@key` and `@cached`: its `@ResolveReference()` runs once per product however
 * many `_entities` requests (gateway queries) ask for it at once. Nest builds the subgraph with
 * @apollo/subgraph's buildSubgraphSchema and then calls `transformSchema`, where herdcache wraps the
 * reference resolver.
 *
 *   SWC_NODE_PROJECT=examples/nestjs/tsconfig.json node -r @swc-node/register examples/nestjs/federation.ts
 *   # http://127.0.0.1:$PORT/graphql (default 3001), to be composed by a gateway or router
 */
import 'reflect-metadata';
import { ApolloFederationDriver, type ApolloFederationDriverConfig } from '@nestjs/apollo';
import { Inject, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Args,
  Directive,
  Field,
  GraphQLModule,
  ID,
  Int,
  ObjectType,
  Query,
  ResolveReference,
  Resolver,
} from '@nestjs/graphql';
import { type Cache, createCache } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
import { cachedDirectiveTransformer, herdcacheContext, herdcacheDirectives } from 'herdcache/graphql';

@ObjectType()
@Directive('@key(fields: "id")')
@Directive('@cached(ttl: 60, tags: ["Product:{id}"])')
export class Product {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  name!: string;

  @Field(() => Int)
  price!: number;
}

/** The catalogue; `calls` counts reference resolutions. */
export class Catalogue {
  readonly calls = { resolveReference: 0 };

  async product(id: string): Promise<Product> {
    await new Promise((resolve) => setTimeout(resolve, 5)); // a database round trip
    return { id, name: `product ${id}`, price: 10 * Number(id) };
  }
}

export const CATALOGUE = Symbol('Catalogue');

@Resolver(() => Product)
export class ProductResolver {
  constructor(@Inject(CATALOGUE) private readonly catalogue: Catalogue) {}

  @Query(() => Product, { nullable: true })
  product(@Args('id', { type: () => ID }) id: string): Promise<Product> {
    return this.catalogue.product(id);
  }

  @ResolveReference()
  resolveReference(reference: { __typename: string; id: string }): Promise<Product> {
    this.catalogue.calls.resolveReference++;
    return this.catalogue.product(reference.id);
  }
}

export function subgraphModule(cache: Cache, catalogue: Catalogue) {
  @Module({
    imports: [
      GraphQLModule.forRoot<ApolloFederationDriverConfig>({
        driver: ApolloFederationDriver,
        autoSchemaFile: { federation: 2 },
        buildSchemaOptions: { directives: [...herdcacheDirectives] },
        // Runs on the subgraph schema (buildSubgraphSchema's, reference resolvers attached).
        transformSchema: (schema) => cachedDirectiveTransformer(schema, { cache }),
        plugins: [herdcachePlugin({ cache })],
        context: () => herdcacheContext({ cache }),
        playground: false,
      }),
    ],
    providers: [ProductResolver, { provide: CATALOGUE, useValue: catalogue }],
  })
  class SubgraphModule {}
  return SubgraphModule;
}

if (require.main === module) {
  (async () => {
    const app = await NestFactory.create(subgraphModule(createCache(), new Catalogue()), { logger: ['error', 'warn'] });
    await app.listen(Number(process.env.PORT ?? 3001), process.env.HOST ?? '127.0.0.1');
    console.log(
      `GraphQL subgraph (NestJS) on http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}/graphql`,
    );
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}

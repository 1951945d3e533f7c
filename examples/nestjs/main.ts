/**
 * NestJS 11 + @nestjs/apollo 13 on herdcache (see ./app.ts).
 *
 *   SWC_NODE_PROJECT=examples/nestjs/tsconfig.json node -r @swc-node/register examples/nestjs/main.ts
 *   # http://127.0.0.1:$PORT/graphql (default 3000)
 *
 * Nest's @Args() reads the decorator metadata TypeScript emits (`emitDecoratorMetadata`): run it
 * with a compiler that emits it (tsc, swc: @swc-node/register here), not tsx (esbuild emits none:
 * "Cannot read properties of undefined (reading '0')" in @nestjs/graphql's reflection).
 *
 *   curl -s localhost:3000/graphql -H 'content-type: application/json' -d '{"query":"{ book(id: \"1\") { title rating } }"}'
 */
import { start } from './app';

start().then(
  ({ url }) => console.log(`GraphQL (NestJS) on ${url}`),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

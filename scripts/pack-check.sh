#!/usr/bin/env bash
# The package as a user installs it: packs the tarball, installs it into a temp project with NO
# peer dependencies, and checks that
#   1. a strict TypeScript project (strict, exactOptionalPropertyTypes, skipLibCheck: false) compiles against `herdcache`
#      with moduleResolution node16 (ESM and CJS) and bundler, with no peer installed (and
#      without @types/node: the core's types need nothing but the ES library);
#   2. every entry (herdcache, /redis, /graphql, /apollo, /envelop, /prometheus, /otel) is
#      typed against its own peers only: a strict project that has just those peers compiles;
#   3. every entry imports (ESM) and requires (CJS) and exposes its API.
# Peers and TypeScript come from this checkout's node_modules (symlinked): fast, and offline.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tsc="$root/node_modules/typescript/bin/tsc"

# npm pack runs prepack (the build); a dist/ newer than every source is packed as it is.
if [ -f "$root/dist/index.mjs" ] && [ -z "$(find "$root/src" "$root/tsup.config.ts" "$root/package.json" -newer "$root/dist/index.mjs" -print -quit)" ]; then
  pack_flags=(--ignore-scripts)
else
  pack_flags=()
fi
tarball="$(cd "$root" && npm pack --silent "${pack_flags[@]}" --pack-destination "$tmp" | tail -n 1)"
echo "packed $tarball"
for required in LICENSE CHANGELOG.md README.md docs/core.md docs/redis.md docs/graphql.md docs/operations.md docs/response-cache.md schema/cached.graphql dist/index.mjs dist/index.js dist/index.d.ts dist/index.d.mts; do
  tar -tzf "$tmp/$tarball" "package/$required" >/dev/null 2>&1 || { echo "the tarball lacks $required"; exit 1; }
done

# The installed package, once; each check below gets a copy next to exactly the peers it may use.
mkdir "$tmp/install" && cd "$tmp/install"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent --prefer-offline "$tmp/$tarball"

# The published types carry no internals: members marked /** @internal */ (the registry's `_`
# members, a source's run/groups, a sink's count) are stripped (tsup: stripInternal).
internal='\b(_load|_peek|_computation|_reserveNamespace|_read|_compute|_loadAlone|_getOrCompute)\b|^\s+(readonly\s+)?_[A-Za-z]\w*\??[<(:]'
if grep -nE "$internal" node_modules/herdcache/dist/*.d.ts node_modules/herdcache/dist/*.d.mts; then
  echo "internal members in the published types (mark them /** @internal */)"; exit 1
fi
# The CJS build keeps `?.` and `??` as written (tsup.config.ts: treeshake): sucrase's helpers for them
# allocate an array and closures per use, on the hit path too.
if grep -l '_optionalChain\|_nullishCoalesce' node_modules/herdcache/dist/*.js; then
  echo "the CJS build lowers ?. / ?? into sucrase helpers (tsup's cjs-splitting pass): keep treeshake on"; exit 1
fi
for peer in graphql @apollo/server ioredis prom-client @envelop/core @opentelemetry/api; do
  test ! -e "node_modules/$peer" || { echo "npm installed the optional peer $peer"; exit 1; }
done

# project <dir> <peer>...: a project with the installed herdcache (and its dependencies) and
# symlinks to the given peers only; an entry with peers also gets @types/node (their types need it).
project() {
  local dir="$tmp/$1"
  shift
  mkdir -p "$dir/node_modules/@types"
  cp -R "$tmp/install/node_modules/." "$dir/node_modules/"
  if [ $# -gt 0 ]; then ln -s "$root/node_modules/@types/node" "$dir/node_modules/@types/node"; fi
  for peer in "$@"; do
    mkdir -p "$(dirname "$dir/node_modules/$peer")"
    ln -s "$root/node_modules/$peer" "$dir/node_modules/$peer"
  done
  printf '{ "name": "%s", "private": true, "type": "module" }\n' "$(basename "$dir")" >"$dir/package.json"
}

# typecheck <dir> <module> <moduleResolution> <file>: strict, and the libraries' .d.ts checked too.
typecheck() {
  local types='[]'
  if [ -e "$1/node_modules/@types/node" ]; then types='["node"]'; fi
  cat >"$1/tsconfig.$4.json" <<JSON
{ "compilerOptions": { "strict": true, "exactOptionalPropertyTypes": true, "skipLibCheck": false, "noEmit": true, "target": "ES2022",
  "module": "$2", "moduleResolution": "$3", "types": $types }, "files": ["$4"] }
JSON
  (cd "$1" && node "$tsc" -p "tsconfig.$4.json") || { echo "type check failed: $1 ($2/$3)"; return 1; }
}

# Type checks are the slow part (each loads its peers' .d.ts): they run in parallel, then are awaited.
pending=()
in_background() {
  "$@" &
  pending+=("$!")
}
await_all() {
  local failed=0
  for pid in "${pending[@]}"; do wait "$pid" || failed=1; done
  pending=()
  [ "$failed" = 0 ] || exit 1
}

# 1. herdcache with no peer at all.
project core
cat >"$tmp/core/check.ts" <<'TS'
import { createCache, memoryStore, HerdcacheError, type Cache, type CacheHooks, type MetricsSnapshot } from 'herdcache';
const cache: Cache = createCache({ store: memoryStore({ max: 10 }), ttl: 1000 });
const hooks: CacheHooks = { onHit: (key: string, source: string) => void [key, source] };
cache.observe(hooks);
const users = cache.loader<string, { id: string }>({ name: 'user', batch: (ids) => ids.map((id) => ({ id })) });
export async function main(): Promise<number> {
  const user: { id: string } = await cache.request().loader(users).load('1');
  const snapshot: MetricsSnapshot = cache.metrics();
  const n: number = await cache.getOrCompute('k', () => 7);
  return n + snapshot.total.hits + user.id.length + (new HerdcacheError('E_CLOSED', 'x').code === 'E_CLOSED' ? 0 : 1);
}
TS
cp "$tmp/core/check.ts" "$tmp/core/check.cts"
cp "$tmp/core/check.ts" "$tmp/core/bundled.ts"
in_background typecheck "$tmp/core" node16 node16 check.ts
in_background typecheck "$tmp/core" node16 node16 check.cts
in_background typecheck "$tmp/core" esnext bundler bundled.ts

# 2 + 3. Each entry with its own peers: types, import, require. `names` are exports that must exist.
check_entry() {
  local entry="$1" names="$2"
  shift 2
  local dir="entry-${entry//\//-}"
  project "$dir" "$@"
  local first="${names%% *}"
  printf "import { %s } from '%s';\nexport const loaded: unknown = %s;\n" "${names// /, }" "$entry" "$first" >"$tmp/$dir/check.ts"
  # The core entry's types are checked above, in three resolutions.
  if [ "$entry" != herdcache ]; then in_background typecheck "$tmp/$dir" node16 node16 check.ts; fi
  cat >"$tmp/$dir/run.mjs" <<JS
import { createRequire } from 'node:module';
const names = '$names'.split(' ');
const imported = await import('$entry');
const required = createRequire(import.meta.url)('$entry');
for (const name of names) {
  if (imported[name] === undefined) throw new Error('import("$entry"): ' + name + ' missing');
  if (required[name] === undefined) throw new Error('require("$entry"): ' + name + ' missing');
}
JS
  (cd "$tmp/$dir" && node run.mjs) || { echo "import/require failed: $entry"; exit 1; }
  echo "imports and requires: $entry (peers: ${*:-none})"
}

check_entry herdcache "createCache memoryStore manualClock jitteredTtl HerdcacheError Cache Loader RequestScope"
check_entry herdcache/redis "redisStore tieredStore jsonCodec" ioredis
check_entry herdcache/graphql "cachedDirectiveTransformer cachedDirectiveTypeDefs herdcacheDirectives cachedDirective invalidatesDirective CacheScopeEnum herdcacheContext requestScope cacheReport cachedFieldKey" graphql
check_entry herdcache/apollo "herdcachePlugin" @apollo/server graphql
check_entry herdcache/envelop "useHerdcache" @envelop/core graphql
check_entry herdcache/prometheus "herdcacheMetrics prometheusMetrics" prom-client
check_entry herdcache/otel "tracingHooks tracedStore" @opentelemetry/api
# The plugins handed to their servers, as the README's quick start does, from an ES module and a
# CommonJS one: the server's types and the plugin's must be the same module's (its ESM and CJS
# declarations are distinct types to TypeScript: @apollo/server's HeaderMap is nominal).
cat >"$tmp/entry-herdcache-apollo/plugged.ts" <<'TS'
import { ApolloServer } from '@apollo/server';
import { buildSchema } from 'graphql';
import { createCache } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
export const server = new ApolloServer({ schema: buildSchema('type Query { a: Int }'), plugins: [herdcachePlugin({ cache: createCache() })] });
TS
cat >"$tmp/entry-herdcache-envelop/plugged.ts" <<'TS'
import { envelop, useSchema } from '@envelop/core';
import { buildSchema } from 'graphql';
import { createCache } from 'herdcache';
import { useHerdcache } from 'herdcache/envelop';
export const getEnveloped = envelop({ plugins: [useSchema(buildSchema('type Query { a: Int }')), useHerdcache({ cache: createCache() })] });
TS
for dir in entry-herdcache-apollo entry-herdcache-envelop; do
  cp "$tmp/$dir/plugged.ts" "$tmp/$dir/plugged.cts"
  cp "$tmp/$dir/plugged.ts" "$tmp/$dir/bundled.ts"
  in_background typecheck "$tmp/$dir" node16 node16 plugged.ts
  in_background typecheck "$tmp/$dir" node16 node16 plugged.cts
  in_background typecheck "$tmp/$dir" esnext bundler bundled.ts
done
await_all
echo "types ok: herdcache (strict, exactOptionalPropertyTypes, skipLibCheck false, no peers, no @types/node: node16 ESM + CJS, bundler); every other entry with only its own peers; the plugins given to ApolloServer and envelop() from ESM and CJS"

# One class across entries: an error thrown by one entry is `instanceof` the core's, in CJS and ESM.
cd "$tmp/entry-herdcache-redis"
node -e "
const { HerdcacheError } = require('herdcache');
try { require('herdcache/redis').redisStore({}); } catch (e) { if (!(e instanceof HerdcacheError)) throw new Error('two HerdcacheError classes (CJS)'); }
const c = require('herdcache').createCache();
c.getOrCompute('k', async () => 42).then((v) => { if (v !== 42) throw new Error('require: wrong value ' + v); });
"
node --input-type=module -e "
import { HerdcacheError } from 'herdcache';
import { redisStore } from 'herdcache/redis';
try { redisStore({}); } catch (e) { if (!(e instanceof HerdcacheError)) throw new Error('two HerdcacheError classes (ESM)'); }
"
# The bundle keeps class names (no class names itself in its body): stacks and console.log say HerdcacheError, not _HerdcacheError.
node -e "
const { inspect } = require('node:util');
try { require('herdcache').createCache({ ttl: -1 }); } catch (e) {
  if (e.constructor.name !== 'HerdcacheError' || inspect(e).includes('_HerdcacheError')) throw new Error('renamed error class: ' + inspect(e).split('\\n')[0]);
}
"
# Code-first and Federation from the tarball: the GraphQLDirective objects are the installed
# graphql's (a schema accepts them), @cached is read from extensions.directives, and @cached on an
# entity type caches __resolveReference under buildSubgraphSchema (20 representations of 5
# products, 10 concurrent _entities requests: 5 calls). ESM and CJS.
project graphql-usage graphql @apollo/subgraph
cat >"$tmp/graphql-usage/usage.mjs" <<'JS'
import { GraphQLObjectType, GraphQLSchema, GraphQLString, GraphQLDirective, graphql, parse, specifiedDirectives } from 'graphql';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { createCache } from 'herdcache';
import { cachedDirectiveTransformer, cachedDirectiveTypeDefs, herdcacheDirectives } from 'herdcache/graphql';
if (!herdcacheDirectives.every((d) => d instanceof GraphQLDirective)) throw new Error('herdcacheDirectives are not the installed graphql\'s GraphQLDirective');
let calls = 0;
const codeFirst = new GraphQLSchema({
  directives: [...specifiedDirectives, ...herdcacheDirectives],
  query: new GraphQLObjectType({ name: 'Query', fields: { hello: { type: GraphQLString, extensions: { directives: { cached: { ttl: 60 } } }, resolve: () => `hi ${++calls}` } } }),
});
cachedDirectiveTransformer(codeFirst, { cache: createCache() });
await Promise.all(Array.from({ length: 10 }, () => graphql({ schema: codeFirst, source: '{ hello }' })));
if (calls !== 1) throw new Error(`code-first @cached: ${calls} resolver calls, expected 1`);
let references = 0;
const subgraph = buildSubgraphSchema({
  typeDefs: parse(`extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
    ${cachedDirectiveTypeDefs}
    type Product @key(fields: "id") @cached(ttl: 60, tags: ["Product:{id}"]) { id: ID!, name: String! }
    type Query { product(id: ID!): Product }`),
  resolvers: { Product: { __resolveReference: async (ref) => ({ id: ref.id, name: `p${(references++, ref.id)}` }) } },
});
cachedDirectiveTransformer(subgraph, { cache: createCache() });
const representations = Array.from({ length: 20 }, (_, i) => ({ __typename: 'Product', id: String(i % 5) }));
const source = 'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Product { id name } } }';
const results = await Promise.all(Array.from({ length: 10 }, () => graphql({ schema: subgraph, source, variableValues: { r: representations } })));
for (const result of results) if (result.errors) throw new Error(JSON.stringify(result.errors));
if (references !== 5) throw new Error(`entity @cached: ${references} __resolveReference calls, expected 5`);
JS
# The same in CommonJS: requires instead of imports, inside an async function.
{ echo '(async () => {'; sed "s#^import { \(.*\) } from '\(.*\)';#const { \1 } = require('\2');#" "$tmp/graphql-usage/usage.mjs"
  echo '})().catch((error) => { console.error(error); process.exit(1); });'; } >"$tmp/graphql-usage/usage.cjs"
(cd "$tmp/graphql-usage" && node usage.mjs && node usage.cjs) || { echo "code-first / Federation usage failed"; exit 1; }
# Loaded both ways in one application (a require here, an import there): one copy of herdcache,
# so a cache made through require() works with the graphql entry imported (its request scope too),
# and the reverse. Two builds answered every @cached field with an internal marker.
cat >"$tmp/graphql-usage/mixed.mjs" <<'JS'
import { createRequire } from 'node:module';
import { graphql, buildSchema } from 'graphql';
const require = createRequire(import.meta.url);
for (const [label, core, gql] of [
  ['require core, import graphql', require('herdcache'), await import('herdcache/graphql')],
  ['import core, require graphql', await import('herdcache'), require('herdcache/graphql')],
]) {
  let calls = 0;
  const schema = buildSchema(`${gql.cachedDirectiveTypeDefs} type Query { n: Int @cached(ttl: 60) }`);
  schema.getQueryType().getFields().n.resolve = () => ++calls;
  const cache = core.createCache();
  gql.cachedDirectiveTransformer(schema, { cache });
  for (let i = 0; i < 3; i++) {
    const result = await graphql({ schema, source: '{ n }', contextValue: gql.herdcacheContext({ cache }) });
    if (result.errors || result.data.n !== 1) throw new Error(`${label}: ${JSON.stringify(result)}`);
  }
  if (calls !== 1 || cache.metrics().total.hits !== 2) throw new Error(`${label}: ${calls} calls, ${cache.metrics().total.hits} hits`);
}
JS
(cd "$tmp/graphql-usage" && node mixed.mjs) || { echo "herdcache loaded both ways: two copies"; exit 1; }
echo "loaded both ways (require and import in one application): one copy"
echo "code-first directives and Federation entity caching: ok (ESM and CJS, graphql and @apollo/subgraph only)"

# The response cache from the tarball, on Apollo Server: a cold then a warm identical query, the
# second answered from the cache (one resolver call; extensions.cache.response miss, then hit).
project apollo-usage graphql @apollo/server
cat >"$tmp/apollo-usage/usage.mjs" <<'JS'
import { ApolloServer } from '@apollo/server';
import { buildSchema } from 'graphql';
import { createCache } from 'herdcache';
import { herdcachePlugin } from 'herdcache/apollo';
let calls = 0;
const schema = buildSchema(`directive @cacheControl(maxAge: Int) on FIELD_DEFINITION | OBJECT
  type Query { hello: String @cacheControl(maxAge: 60) }`);
schema.getQueryType().getFields().hello.resolve = () => `hi ${++calls}`;
const server = new ApolloServer({ schema, plugins: [herdcachePlugin({ cache: createCache(), extensions: true, responseCache: true })] });
await server.start();
const outcomes = [];
for (let i = 0; i < 2; i++) {
  const { body } = await server.executeOperation({ query: '{ hello }' });
  if (body.singleResult.data?.hello !== 'hi 1') throw new Error(`response cache: ${JSON.stringify(body.singleResult)}`);
  outcomes.push(body.singleResult.extensions?.cache?.response);
}
await server.stop();
if (calls !== 1 || outcomes.join(',') !== 'miss,hit') throw new Error(`response cache: ${calls} resolver calls, outcomes ${outcomes.join(',')}; expected 1, miss,hit`);
JS
(cd "$tmp/apollo-usage" && node usage.mjs) || { echo "response cache usage failed"; exit 1; }
echo "response cache on Apollo Server: ok (cold miss, warm hit, one execution)"

echo "pack check ok: $tarball"

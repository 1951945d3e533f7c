/**
 * After tsup: each entry's ESM file (`dist/<entry>.mjs`) and its types (`.d.mts`) re-export the
 * CommonJS build, so an application that loads herdcache both ways (a `require` here, an
 * `import` in a dependency there) gets ONE copy of every class and internal marker. Two copies
 * (tsup's separate ESM build) made a cache created through `require('herdcache')` and handed to
 * `import … from 'herdcache/graphql'` answer every @cached field with an internal sentinel, and
 * TypeScript refuse the `Cache` of one build for the other (its #private members). Node's ESM
 * loader finds the CommonJS build's named exports itself (cjs-module-lexer reads its
 * `exports.name =` assignments); scripts/pack-check.sh checks every entry both ways, mixed too.
 * The ESM chunks tsup made are then unused, and removed.
 */
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
// The entries: tsup.config.ts's (index, redis, graphql, …), as built (chunks are `chunk-*.js`).
const entries = readdirSync(dist)
  .filter((file) => /^[a-z]+\.js$/.test(file))
  .map((file) => file.slice(0, -3));
if (entries.length === 0) throw new Error('esm-wrappers: no entry in dist/ (run tsup first)');

const header =
  '// The CommonJS build, re-exported: one copy of herdcache however it is loaded (scripts/esm-wrappers.mjs).\n';
// An entry whose types name a peer's (`@apollo/server`'s ApolloServerPlugin…) and declare no class
// gets its declarations themselves in its .d.mts: a peer's types are resolved where they are named,
// and a re-export of the .d.ts names the peer's CommonJS declarations, which TypeScript does not
// take for its ESM ones (an ES module's `new ApolloServer({ plugins: [herdcachePlugin(…)] })` failed:
// @apollo/server's HeaderMap is nominal). Its shared declarations stay one (the chunks' .d.ts);
// an entry declaring a class keeps the re-export (one class, however it is loaded).
const namesPeers = (types) => /^import .* from '[^.]/m.test(types) && !/\bdeclare class\b/.test(types);
for (const entry of entries) {
  writeFileSync(join(dist, `${entry}.mjs`), `${header}export * from './${entry}.js';\n`);
  const types = readFileSync(join(dist, `${entry}.d.ts`), 'utf8');
  writeFileSync(
    join(dist, `${entry}.d.mts`),
    namesPeers(types)
      ? `// The declarations of ${entry}.d.ts, resolving the peers' types as an ES module does (scripts/esm-wrappers.mjs).\n${types}`
      : `${header}export * from './${entry}.js';\n`,
  );
  rmSync(join(dist, `${entry}.mjs.map`), { force: true });
}
for (const file of readdirSync(dist)) {
  if (/^chunk-.*\.mjs(\.map)?$/.test(file) || (/\.d\.mts$/.test(file) && file.includes('-'))) rmSync(join(dist, file));
}

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
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
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
for (const entry of entries) {
  writeFileSync(join(dist, `${entry}.mjs`), `${header}export * from './${entry}.js';\n`);
  writeFileSync(join(dist, `${entry}.d.mts`), `${header}export * from './${entry}.js';\n`);
  rmSync(join(dist, `${entry}.mjs.map`), { force: true });
}
for (const file of readdirSync(dist)) {
  if (/^chunk-.*\.mjs(\.map)?$/.test(file) || (/\.d\.mts$/.test(file) && file.includes('-'))) rmSync(join(dist, file));
}

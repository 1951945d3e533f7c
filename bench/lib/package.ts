/**
 * herdcache as the bench measures it: the built package (dist/, what `require('herdcache')` loads
 * for a user: `npm run build`) when it is there and no file of src/ is newer, else src/ through tsx.
 * The two differ on the hit path: tsx compiles each source file to its own CommonJS module, and
 * reading an imported binding then goes through a getter; the package is bundled. Rows say which
 * they measured (see `source`). Set HERDCACHE_BENCH_SOURCE=src to measure src/ anyway.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');
const built = join(root, 'dist', 'index.js');

function newestIn(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, name.name);
    newest = Math.max(newest, name.isDirectory() ? newestIn(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function fromBuild(): boolean {
  if (process.env.HERDCACHE_BENCH_SOURCE === 'src' || !existsSync(built)) return false;
  return statSync(built).mtimeMs >= newestIn(join(root, 'src'));
}

const useBuild = fromBuild();

/** What the rows measured: "the built package (dist/)" or "src/ through tsx". */
export const source = useBuild ? 'the built package (dist/, CommonJS)' : 'src/ through tsx (no build newer than src/)';

/* eslint-disable @typescript-eslint/no-require-imports -- one of two module trees, chosen at run time */
export const core = require(
  useBuild ? join(root, 'dist', 'index.js') : join(root, 'src', 'core'),
) as typeof import('../../src/core');
export const redis = require(
  useBuild ? join(root, 'dist', 'redis.js') : join(root, 'src', 'redis'),
) as typeof import('../../src/redis');
/** Where the measured herdcache's modules are (dist/ or src/): row 7 loads them afresh per schema. */
export const moduleRoot = useBuild ? join(root, 'dist') : join(root, 'src');

/** Loaded on first use: graphql is an optional peer, and only row 7's child needs it here. */
export function graphqlEntry(): typeof import('../../src/graphql') {
  return require(
    useBuild ? join(root, 'dist', 'graphql.js') : join(root, 'src', 'graphql'),
  ) as typeof import('../../src/graphql');
}
/** herdcache/apollo and herdcache/envelop, loaded on first use (their peers are optional): row 9's servers. */
export function apolloEntry(): typeof import('../../src/apollo') {
  return require(
    useBuild ? join(root, 'dist', 'apollo.js') : join(root, 'src', 'apollo'),
  ) as typeof import('../../src/apollo');
}
export function envelopEntry(): typeof import('../../src/envelop') {
  return require(
    useBuild ? join(root, 'dist', 'envelop.js') : join(root, 'src', 'envelop'),
  ) as typeof import('../../src/envelop');
}
/* eslint-enable @typescript-eslint/no-require-imports */

#!/usr/bin/env bash
# Packs the package, installs the tarball into a temp project, and checks that both
# `require('herdcache')` and `import('herdcache')` work and expose the public API.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tarball="$(cd "$root" && npm pack --silent --pack-destination "$tmp" | tail -n 1)"
cd "$tmp"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent "$tmp/$tarball"
node -e "
const h = require('herdcache');
if (typeof h.createCache !== 'function') throw new Error('require: createCache missing');
const c = h.createCache();
c.getOrCompute('k', async () => 42).then(v => { if (v !== 42) throw new Error('require: wrong value ' + v); console.log('require ok'); });
"
cat > check.mjs <<'MJS'
import { createCache, jitteredTtl } from 'herdcache';
const c = createCache();
const v = await c.getOrCompute('k', async () => 7);
if (v !== 7 || typeof jitteredTtl !== 'function') throw new Error('import: wrong');
console.log('import ok');
MJS
node check.mjs
test -f node_modules/herdcache/dist/index.d.ts || { echo 'missing .d.ts'; exit 1; }
echo "pack check ok: $tarball"

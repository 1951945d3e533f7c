// Fails on an import cycle among the files of src/ (type-only imports included: a cycle of types is
// still a cycle a reader has to untangle). Relative imports only; plain regex, no TypeScript needed.
// Usage: node scripts/cycles.mjs [folder]   (default: src)
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const root = join(dirname(new URL(import.meta.url).pathname), '..');
const src = process.argv[2] ?? join(root, 'src');

// Known cycles, allowed while being taken apart; an entry is the sorted member list of one cycle.
// None is left (the load path's one-way stages removed the last ones): keep it empty.
const ALLOWED = new Set([]);

const files = readdirSync(src, { recursive: true })
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(src, f));
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^'";]*?\bfrom\s*['"](\.[^'"]*)['"]|(?:^|\n)\s*import\s*['"](\.[^'"]*)['"]/g;

function resolve(from, spec) {
  const base = join(dirname(from), spec);
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) if (existsSync(candidate)) return candidate;
  throw new Error(`${relative(root, from)}: cannot resolve '${spec}'`);
}

const edges = new Map(files.map((f) => [f, new Set()]));
for (const file of files) {
  for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) edges.get(file).add(resolve(file, m[1] ?? m[2]));
}

// Tarjan's strongly connected components: every component of more than one file is a cycle.
let index = 0;
const stack = [];
const info = new Map();
const components = [];
function visit(v) {
  info.set(v, { index, low: index, onStack: true });
  index++;
  stack.push(v);
  for (const w of edges.get(v)) {
    if (!info.has(w)) {
      visit(w);
      info.get(v).low = Math.min(info.get(v).low, info.get(w).low);
    } else if (info.get(w).onStack) info.get(v).low = Math.min(info.get(v).low, info.get(w).index);
  }
  if (info.get(v).low === info.get(v).index) {
    const component = [];
    let w;
    do {
      w = stack.pop();
      info.get(w).onStack = false;
      component.push(relative(src, w));
    } while (w !== v);
    if (component.length > 1 || edges.get(v).has(v)) components.push(component.sort());
  }
}
for (const f of files) if (!info.has(f)) visit(f);

let failed = false;
const seen = new Set();
for (const component of components) {
  const name = component.join(' ');
  seen.add(name);
  console.log(`${ALLOWED.has(name) ? 'allowed' : 'CYCLE'}: ${component.join(' ↔ ')}`);
  if (!ALLOWED.has(name)) failed = true;
}
for (const name of ALLOWED) if (!seen.has(name)) console.log(`gone (remove it from ALLOWED): ${name}`);
console.log(
  `${files.length} files in ${relative(root, src) || '.'}, ${components.length} import cycle(s)${failed ? '' : ', none unexpected'}`,
);
process.exit(failed ? 1 : 0);

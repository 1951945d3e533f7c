import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// scripts/cycles.mjs, run by CI: fails on an import cycle among the files of a folder.
const script = join(__dirname, '..', '..', 'scripts', 'cycles.mjs');
const run = (dir?: string) =>
  spawnSync(process.execPath, dir === undefined ? [script] : [script, dir], { encoding: 'utf8' });

describe('scripts/cycles.mjs', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herdcache-cycles-'));
    mkdirSync(join(dir, 'core'));
    mkdirSync(join(dir, 'graphql'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('src has no cycle outside the allowed ones', () => {
    const result = run();
    expect(result.stdout).not.toContain('CYCLE');
    expect(result.status).toBe(0);
  });

  test('a cycle through a type-only, a multi-line and an index import fails and is named', () => {
    writeFileSync(join(dir, 'graphql', 'a.ts'), "import type { B } from './b';\nexport type A = B;\n");
    writeFileSync(
      join(dir, 'graphql', 'b.ts'),
      "import {\n  c,\n} from '../core';\nexport type B = number;\nexport const b = c;\n",
    );
    writeFileSync(join(dir, 'core', 'index.ts'), "export { c } from './c';\n");
    writeFileSync(join(dir, 'core', 'c.ts'), "import type { A } from '../graphql/a';\nexport const c: A = 1;\n");
    writeFileSync(join(dir, 'core', 'leaf.ts'), "import { c } from './c';\nexport const leaf = c;\n");
    const result = run(dir);
    expect(result.stdout).toContain('CYCLE: core/c.ts ↔ core/index.ts ↔ graphql/a.ts ↔ graphql/b.ts');
    expect(result.stdout).not.toContain('leaf');
    expect(result.status).toBe(1);
  });

  test('a folder without cycles passes', () => {
    writeFileSync(join(dir, 'core', 'a.ts'), "import { b } from './b';\nexport const a = b;\n");
    writeFileSync(join(dir, 'core', 'b.ts'), 'export const b = 1;\n');
    const result = run(dir);
    expect(result.stdout).toContain('0 import cycle(s)');
    expect(result.status).toBe(0);
  });
});

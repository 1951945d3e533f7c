/**
 * ARCHITECTURE.md traces a load file by file: every path it names exists, and every `Class.member`
 * it names is declared in the file that declares the class (a rename or a split that forgets the
 * trace fails here).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './snippets';

const text = readFileSync(join(root, 'ARCHITECTURE.md'), 'utf8');
const quoted = [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
const paths = [...new Set(quoted.filter((q) => /^[\w.-]+(\/[\w.-]+)*\.(ts|mjs|md)$/.test(q) && q.includes('/')))];
const members = [...new Set(quoted.filter((q) => /^[A-Z]\w*\.#?\w+$/.test(q)))];

const sources = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.ts'))
  .map((f) => readFileSync(join(root, 'src', f), 'utf8'));

/** The member is declared in the file that declares the class (or interface): `name(`, `name<`, `name =`, `get name`. */
function declared(member: string): boolean {
  const [owner, name] = member.split('.') as [string, string];
  const escaped = name.replace(/[#$]/g, (c) => `\\${c}`);
  const owners = sources.filter((code) => new RegExp(`\\b(class|interface) ${owner}\\b`).test(code));
  return owners.some((code) =>
    new RegExp(`^\\s+(readonly |async |get |static )*${escaped}\\??\\s*(\\(|<|=|:)`, 'm').test(code),
  );
}

it('names files and members', () => {
  expect(paths.length).toBeGreaterThanOrEqual(20);
  expect(members.length).toBeGreaterThanOrEqual(10);
});

it.each(paths)('%s exists', (path) => {
  expect(existsSync(join(root, path))).toBe(true);
});

it.each(members)('%s is declared', (member) => {
  expect(declared(member)).toBe(true);
});

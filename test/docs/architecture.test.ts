/**
 * ARCHITECTURE.md traces a load file by file: every path it names exists, and every `Class.member`
 * it names is declared in the file that declares the class (a rename or a split that forgets the
 * trace fails here), and no source file outgrows one read.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './snippets';

const text = readFileSync(join(root, 'ARCHITECTURE.md'), 'utf8');
const quoted = [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
const paths = [...new Set(quoted.filter((q) => /^[\w.-]+(\/[\w.-]+)*\.(ts|mjs|md)$/.test(q) && q.includes('/')))];
const members = [...new Set(quoted.filter((q) => /^[A-Z]\w*\.#?\w+$/.test(q)))];

const files = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
const sources = files.map((f) => readFileSync(join(root, 'src', f), 'utf8'));

/** The shape rule a newcomer relies on: a source file fits one read (issue 20: none over 400 lines). */
const MAX_LINES = 400;

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

it(`no source file in src is over ${MAX_LINES} lines`, () => {
  const long = files
    .map((file, i) => ({ file, lines: sources[i]!.split('\n').length - (sources[i]!.endsWith('\n') ? 1 : 0) }))
    .filter(({ lines }) => lines > MAX_LINES);
  expect(long).toEqual([]);
  expect(files.length).toBeGreaterThanOrEqual(80);
});

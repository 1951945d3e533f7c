/**
 * Every README/docs snippet and example that creates an ioredis connection attaches an 'error'
 * listener to it: without one ioredis prints "[ioredis] Unhandled error event" on every failed
 * reconnect, and users copy these snippets as they are.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { root, snippets as docSnippets } from './snippets';

const snippets: [string, string][] = docSnippets()
  .filter((s) => s.lang === 'ts')
  .map((s) => [s.where, s.code]);
for (const file of readdirSync(join(root, 'examples')).filter((f) => f.endsWith('.ts'))) {
  snippets.push([`examples/${file}`, readFileSync(join(root, 'examples', file), 'utf8')]);
}

/** Connections a snippet creates: `const x = new Redis(…)`, `new Cluster(…)`, `….duplicate(…)`; an unnamed one is "(unnamed)". */
function connections(code: string): string[] {
  const names = [...code.matchAll(/const (\w+) = (?:await )?(?:new (?:Redis|Cluster)\(|\w+\.duplicate\()/g)].map(
    (m) => m[1]!,
  );
  const created = (code.match(/new (?:Redis|Cluster)\(|\.duplicate\(/g) ?? []).length;
  return created > names.length ? [...names, '(unnamed)'] : names;
}

it('the snippets that create Redis connections are found', () => {
  expect(snippets.filter(([, code]) => connections(code).length > 0).length).toBeGreaterThanOrEqual(3);
});

it.each(snippets.filter(([, code]) => connections(code).length > 0))(
  '%s: every connection has an error listener',
  (_where, code) => {
    const missing = connections(code).filter((name) => !code.includes(`${name}.on('error'`));
    expect(missing).toEqual([]);
  },
);

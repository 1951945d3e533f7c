/**
 * docs/core.md's "Intended differences" and the suite's INTENDED_DIFFERENCES are one list: the README
 * names exactly the behaviours the suite expects to differ, no more, no fewer.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { INTENDED_DIFFERENCES } from './intended-differences';

it("docs/core.md's migration section lists exactly the suite's intended differences", () => {
  const readme = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'core.md'), 'utf8');
  const start = readme.indexOf('### Intended differences');
  expect(start).toBeGreaterThan(0);
  const section = readme.slice(start, readme.indexOf('\n## ', start));
  const listed = [...section.matchAll(/^- \*\*(.+?)\*\*:/gm)].map((match) => match[1]);
  expect(listed.sort()).toEqual(Object.keys(INTENDED_DIFFERENCES).sort());
});

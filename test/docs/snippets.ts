/**
 * The code blocks of README.md and docs/*.md, as a test reads them. A ```ts block is type-checked
 * as it stands (test/docs/snippets.test.ts); a block meant as a fragment says so in its info string
 * (```ts partial) and is only counted, so that such blocks stay rare.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export const root = join(__dirname, '..', '..');

export interface Snippet {
  /** `docs/core.md ts block 2 (line 231)` */
  where: string;
  file: string;
  line: number;
  lang: string;
  partial: boolean;
  code: string;
}

export function docFiles(): string[] {
  return [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
}

export function snippets(): Snippet[] {
  const found: Snippet[] = [];
  for (const file of docFiles()) {
    const text = readFileSync(join(root, file), 'utf8');
    const counts = new Map<string, number>();
    for (const match of text.matchAll(/^```(\w+)([^\n]*)\n([\s\S]*?)^```$/gm)) {
      const lang = match[1]!;
      const n = (counts.get(lang) ?? 0) + 1;
      counts.set(lang, n);
      const line = text.slice(0, match.index).split('\n').length;
      found.push({
        where: `${file} ${lang} block ${n} (line ${line})`,
        file,
        line,
        lang,
        partial: /\bpartial\b/.test(match[2]!),
        code: match[3]!,
      });
    }
  }
  return found;
}

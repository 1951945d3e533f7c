/**
 * Every ```ts block of README.md and docs/*.md type-checks against the sources (one TypeScript
 * program, the blocks as virtual modules importing `herdcache/…` as users do), every ```graphql
 * block parses, every ```json block is JSON: the docs cannot drift from the API unnoticed.
 *
 * A block reads like the page around it, so names it takes from the reader's application (`db`,
 * `id`, `authenticate`, …) are declared once in AMBIENT below, loosely typed: what is checked is
 * herdcache's side (imports, option names and types, return types). A block that cannot stand
 * alone says so (```ts partial) and is only counted.
 */
import { join } from 'node:path';
import { parse } from 'graphql';
import ts from 'typescript';
import { root, snippets } from './snippets';

/** The reader's application, as the snippets assume it. */
const AMBIENT = `
declare const db: any;
declare const id: string;
interface User { id: string; name: string }
declare function authenticate(req: unknown): Promise<string | undefined>;
// What a page has set up before the block (its own blocks make them the same way).
declare const cache: import('herdcache').Cache;
declare const client: import('ioredis').Redis;
declare const schema: import('graphql').GraphQLSchema;
declare const registry: import('prom-client').Registry;
declare const userLoader: import('herdcache').Loader<string, User>;
declare const postLoader: import('herdcache').Loader<string, unknown>;
declare const l2: ReturnType<typeof import('herdcache/redis').redisStore>;
declare const tiered: ReturnType<typeof import('herdcache/redis').tieredStore>;
`;

const all = snippets();
const tsBlocks = all.filter((s) => s.lang === 'ts' && !s.partial);

it('finds the blocks, and partial ones stay rare', () => {
  expect(tsBlocks.length).toBeGreaterThanOrEqual(10);
  expect(all.filter((s) => s.partial).length).toBeLessThanOrEqual(3);
});

it('every ```ts block type-checks against the sources', () => {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(String(d.messageText));
      },
    },
  )!;
  const options: ts.CompilerOptions = {
    ...parsed.options,
    // Top-level await, as the snippets use it; resolution as a bundler's (package exports, paths).
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    noUnusedLocals: false,
    noEmit: true,
    types: ['node'],
  };
  const dir = join(root, '__doc_snippets__');
  const virtual = new Map<string, string>();
  virtual.set(join(dir, 'ambient.d.ts'), AMBIENT);
  const fileOf = new Map<string, string>();
  tsBlocks.forEach((s, i) => {
    const name = join(dir, `${s.file.replace(/[^\w]/g, '_')}_${i}.ts`);
    virtual.set(name, /^\s*(import|export)\s/m.test(s.code) ? s.code : `${s.code}\nexport {};\n`);
    fileOf.set(name, s.where);
  });
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (f) => virtual.get(f) ?? readFile(f);
  host.fileExists = (f) => virtual.has(f) || fileExists(f);
  host.getSourceFile = (f, lang, onError, create) => {
    const text = virtual.get(f);
    return text !== undefined ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, onError, create);
  };
  const program = ts.createProgram([...virtual.keys()], options, host);
  const problems = ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file === undefined || virtual.has(d.file.fileName))
    .map((d) => {
      const where = d.file
        ? `${fileOf.get(d.file.fileName) ?? d.file.fileName}, snippet line ${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}`
        : '(global)';
      return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
  expect(problems).toEqual([]);
}, 180_000);

it.each(all.filter((s) => s.lang === 'graphql').map((s) => [s.where, s] as const))('%s parses', (_where, s) => {
  expect(() => parse(s.code)).not.toThrow();
});

it.each(all.filter((s) => s.lang === 'json').map((s) => [s.where, s] as const))('%s is JSON', (_where, s) => {
  expect(() => JSON.parse(s.code)).not.toThrow();
});

/**
 * examples/nestjs: NestJS 11 code-first with the Apollo driver: `@Directive('@cached(…)')`,
 * `buildSchemaOptions.directives`, `transformSchema`, the plugin. In process over HTTP (the Nest
 * application on 127.0.0.1, an ephemeral port): a stampede asks the database once, a mutation with
 * @invalidates makes the next query fresh. As a program (node -r @swc-node/register, as its header
 * says): it starts and answers.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createCache } from '../../src/core/cache';

/** The example's module, loaded with require: its decorators are type-checked by test/examples/tsconfig.nestjs.json. */
interface NestExample {
  BookDatabase: new () => { calls: { book: number; rating: number } };
  appModule(cache: ReturnType<typeof createCache>, db: object): new () => object;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const example = require('../../examples/nestjs/app') as NestExample;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { NestFactory } = require('@nestjs/core') as {
  NestFactory: { create(module: unknown, options: object): Promise<any> };
};

const QUERY = '{ book(id: "1") { id title rating } }';

async function post(url: string, query: string): Promise<any> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

describe('examples/nestjs', () => {
  it('50 concurrent queries: the database is asked once for the book and once for its rating; @invalidates makes the next query fresh', async () => {
    const cache = createCache();
    const db = new example.BookDatabase();
    const app = await NestFactory.create(example.appModule(cache, db), { logger: ['error'] });
    try {
      await app.listen(0, '127.0.0.1');
      const url = `http://127.0.0.1:${app.getHttpServer().address().port}/graphql`;
      const results = await Promise.all(Array.from({ length: 50 }, () => post(url, QUERY)));
      for (const result of results)
        expect(result.data).toEqual({ book: { id: '1', title: 'The Dispossessed', rating: 4.5 } });
      expect(db.calls).toEqual({ book: 1, rating: 1 });
      const totals = results.map((result) => result.extensions.cache.total);
      expect(totals.reduce((sum, total) => sum + total.misses, 0)).toBe(2);

      const renamed = await post(
        url,
        'mutation { retitleBook(id: "1", title: "The Word for World Is Forest") { title } }',
      );
      expect(renamed.errors).toBeUndefined();
      expect((await post(url, QUERY)).data.book.title).toBe('The Word for World Is Forest');
      expect(db.calls.book).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('runs as a program (node -r @swc-node/register): listens on 127.0.0.1 and answers', async () => {
    const root = join(__dirname, '..', '..');
    // The program imports `herdcache` as a user's project does: the built package (dist/). A fresh
    // clone has none until `npm run build` (.ci/run builds first): built here then.
    if (!existsSync(join(root, 'dist', 'index.js')))
      execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'ignore', timeout: 120_000 });
    const child = spawn(process.execPath, ['-r', '@swc-node/register', join(root, 'examples', 'nestjs', 'main.ts')], {
      cwd: root,
      env: { ...process.env, PORT: '0', SWC_NODE_PROJECT: join(root, 'examples', 'nestjs', 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        let err = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /GraphQL \(NestJS\) on (\S+)/.exec(out);
          if (match) resolve(match[1]!);
        });
        child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${err}${out}`)));
      });
      const first = await post(url, QUERY);
      const second = await post(url, QUERY);
      expect(first.data.book.title).toBe('The Dispossessed');
      expect(second.extensions.cache.total).toMatchObject({ misses: 0 });
      expect(second.extensions.cache.total.hits).toBeGreaterThan(0);
    } finally {
      child.kill();
    }
  }, 180_000);
});

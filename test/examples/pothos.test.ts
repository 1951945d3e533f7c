/**
 * examples/pothos.ts: a Pothos schema (directives plugin) with @cached and @invalidates as field
 * options, built with herdcache's GraphQLDirective objects. In process: a stampede asks the
 * database once and a mutation makes the next query fresh. As a process: it starts and answers.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { graphql, type GraphQLObjectType } from 'graphql';
import { createCache } from '../../src/core/cache';
import { herdcacheContext } from '../../src/graphql';
import { bookDatabase, pothosSchema } from '../../examples/pothos';

const QUERY = '{ book(id: "1") { id title rating } }';

describe('examples/pothos.ts', () => {
  it('50 concurrent queries: the database is asked once for the book and once for its rating', async () => {
    const cache = createCache();
    const db = bookDatabase();
    const schema = pothosSchema(cache, db);
    const results = await Promise.all(
      Array.from({ length: 50 }, () => graphql({ schema, source: QUERY, contextValue: herdcacheContext({ cache }) })),
    );
    for (const result of results)
      expect(result).toEqual({ data: { book: { id: '1', title: 'The Left Hand of Darkness', rating: 4.5 } } });
    expect(db.calls).toEqual({ book: 1, rating: 1 });
  });

  it('Pothos puts the directives in extensions.directives as a list of { name, args } (the form the transform reads)', () => {
    const schema = pothosSchema(createCache(), bookDatabase());
    const field = (schema.getType('Query') as GraphQLObjectType).getFields().book!;
    expect(field.extensions.directives).toEqual([
      { name: 'cached', args: { ttl: 60, swr: 30, tags: ['Book:{args.id}'] } },
    ]);
  });

  it('retitleBook (@invalidates Book:{args.id}): the next query reads the new title', async () => {
    const cache = createCache();
    const db = bookDatabase();
    const schema = pothosSchema(cache, db);
    const run = (source: string) => graphql({ schema, source, contextValue: herdcacheContext({ cache }) });
    await run(QUERY);
    await run(QUERY);
    expect(db.calls.book).toBe(1);
    expect((await run('mutation { retitleBook(id: "1", title: "Dawn") { title } }')).errors).toBeUndefined();
    expect(await run(QUERY)).toEqual({ data: { book: { id: '1', title: 'Dawn', rating: 4.5 } } });
    expect(db.calls.book).toBe(2);
  });

  it('runs as a program (npx tsx examples/pothos.ts): listens on 127.0.0.1 and answers with extensions.cache', async () => {
    const root = join(__dirname, '..', '..');
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'examples', 'pothos.ts')], {
      cwd: root,
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        let err = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /GraphQL \(Pothos\) on (\S+)/.exec(out);
          if (match) resolve(match[1]!);
        });
        child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
      });
      const post = async () =>
        (
          await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query: QUERY }),
          })
        ).json() as Promise<any>;
      const first = await post();
      const second = await post();
      expect(first.data.book.title).toBe('The Left Hand of Darkness');
      expect(first.extensions.cache.total.misses).toBeGreaterThan(0);
      expect(second.extensions.cache.total).toMatchObject({ misses: 0 });
      expect(second.extensions.cache.total.hits).toBeGreaterThan(0);
    } finally {
      child.kill();
    }
  }, 60_000);
});

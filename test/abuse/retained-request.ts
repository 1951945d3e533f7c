/**
 * What a cache keeps after hostile traffic, run in a child process with `--expose-gc` by
 * retained.test.ts and bench/hostile-keys.ts: `count` distinct client-derived strings of `length`
 * characters each, sent through one path of the library, then the heap measured after GC with the
 * cache (and its store) still alive. Prints one JSON line: the heap growth in MiB, the resolver
 * or batch calls, and what the memory store holds (one line per scenario).
 *
 * argv: <scenario[,scenario…]> <count> <length>: scenarios run one after another, each with a
 * cache of its own (the previous one closed and dropped before the next measures its start).
 * - field-args:  `q(s: String): Int @cached`, one request per distinct `$s`
 * - field-values: `v(n: Int): String @cached`, distinct `n`, each value `length` characters
 * - private-sessions: a PRIVATE @cached field, one request per distinct session id of `length`
 * - field-identities: `item(id: String): Item` (plain) and `Item.n: Int @cached`, keyed by the
 *   parent's identity, one request per distinct `$id`
 * - raw-keys: cache.getOrCompute(distinct long key, small value)
 * - coalesce-only: a loader without ttl (stores nothing), distinct long keys
 * - loader-keys: a loader with ttl, distinct long keys, small values
 * - tags: getOrCompute of short keys whose value carries one distinct long tag, and each tag
 *   invalidated after the next key was written (the store notes invalidated tags)
 */
import { graphql } from 'graphql';
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { herdcacheContext } from '../../src/graphql/request';
import { makeSchema } from '../graphql/fixtures';

function heapMiB(): number {
  for (let i = 0; i < 4; i++) global.gc!();
  const usage = process.memoryUsage();
  return (usage.heapUsed + usage.external) / 2 ** 20;
}

/**
 * A distinct flat string of `length` characters, its number up front (as a server gets one from
 * JSON.parse: `'x'.repeat` would build a tree of shared pieces, small in memory whatever its length).
 */
function distinct(i: number, filler: string): string {
  const head = `${i}:`;
  return JSON.parse(`"${head}${filler.slice(head.length)}"`) as string;
}

async function main(): Promise<void> {
  const [scenarios = 'field-args', countArg = '200', lengthArg = String(1 << 20)] = process.argv.slice(2);
  if (global.gc === undefined) throw new Error('run with --expose-gc');
  const filler = 'x'.repeat(Number(lengthArg)); // made before any measure starts, so not counted
  for (const scenario of scenarios.split(',')) await measure(scenario, Number(countArg), filler);
}

async function measure(scenario: string, count: number, filler: string): Promise<void> {
  const length = filler.length;
  const store = memoryStore();
  const cache = createCache({ store });
  let calls = 0;
  const bypassed: string[] = [];
  const schema = makeSchema(
    `type Query {
      q(s: String): Int @cached(ttl: 60000)
      v(n: Int): String @cached(ttl: 60000)
      me: Int @cached(ttl: 60000, scope: PRIVATE)
      item(id: String): Item
    }
    type Item {
      id: String
      n: Int @cached(ttl: 60000)
    }`,
    {
      Query: {
        q: (_p, { s }: { s: string }) => {
          calls++;
          return s.length;
        },
        v: (_p, { n }: { n: number }) => {
          calls++;
          return distinct(n, filler);
        },
        me: () => ++calls,
        item: (_p, { id }: { id: string }) => ({ id }),
      },
      Item: { n: () => ++calls },
    },
  );
  cachedDirectiveTransformer(schema, {
    cache,
    sessionId: (context: { session: string }) => context.session,
    onBypass: (_c, reason) => bypassed.push(reason),
  });
  const coalesceOnly = cache.loader<string, number>({
    name: 'co',
    batch: (keys) => (calls++, keys.map((k) => k.length)),
  });
  const stored = cache.loader<string, number>({
    name: 'st',
    ttl: 60_000,
    batch: (keys) => (calls++, keys.map((k) => k.length)),
  });

  const before = heapMiB();
  const errors: string[] = [];
  for (let i = 0; i < count; i++) {
    // Each string is made here and dropped after its request: only what the cache keeps survives.
    switch (scenario) {
      case 'field-args': {
        const result = await graphql({
          schema,
          source: 'query($s: String) { q(s: $s) }',
          variableValues: { s: distinct(i, filler) },
          contextValue: herdcacheContext({ cache }),
        });
        if (result.errors) errors.push(result.errors[0]!.message);
        break;
      }
      case 'field-values': {
        const result = await graphql({
          schema,
          source: 'query($n: Int) { v(n: $n) }',
          variableValues: { n: i },
          contextValue: herdcacheContext({ cache }),
        });
        if (result.errors) errors.push(result.errors[0]!.message);
        break;
      }
      case 'private-sessions': {
        const result = await graphql({
          schema,
          source: '{ me }',
          contextValue: { ...herdcacheContext({ cache }), session: distinct(i, filler) },
        });
        if (result.errors) errors.push(result.errors[0]!.message);
        break;
      }
      case 'field-identities': {
        const result = await graphql({
          schema,
          source: 'query($id: String) { item(id: $id) { n } }',
          variableValues: { id: distinct(i, filler) },
          contextValue: herdcacheContext({ cache }),
        });
        if (result.errors) errors.push(result.errors[0]!.message);
        break;
      }
      case 'raw-keys':
        await cache.getOrCompute(distinct(i, filler), () => ++calls, { ttl: 60_000 });
        break;
      case 'coalesce-only':
        await coalesceOnly.load(distinct(i, filler));
        break;
      case 'loader-keys':
        await stored.load(distinct(i, filler));
        break;
      case 'tags':
        await cache.getOrCompute(`t${i}`, () => ++calls, { ttl: 60_000, tags: [distinct(i, filler)] });
        if (i > 0) await cache.invalidateTags([distinct(i - 1, filler)]);
        break;
      default:
        throw new Error(`unknown scenario ${scenario}`);
    }
  }
  const after = heapMiB();
  process.stdout.write(
    `${JSON.stringify({ scenario, count, length, retainedMiB: after - before, calls, errors: errors.slice(0, 3), bypassed: [...new Set(bypassed)], entries: store.size, calculatedSize: store.calculatedSize, oversized: store.oversized, tagCount: store.tagCount })}\n`,
  );
  // The cache is used after the measure: it (and everything it holds) was alive when measured.
  // Emptied, so the next scenario starts from nothing whenever this one's objects are collected.
  await cache.clear();
  await cache.close();
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

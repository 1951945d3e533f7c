/**
 * Workload 7, GraphQL in process: the CPU cost of one operation, with no network and no database
 * wait, so what the cache itself costs a warm field shows. One query returns 100 items, each with
 * a child field; graphql-js `execute` runs in a child process with NODE_ENV=production (graphql's
 * development-mode instanceof checks off, as a server runs). Three schemas, same query:
 *   plain     — the child field's resolver returns the value synchronously (the floor);
 *   dataloader — a DataLoader per operation over an in-memory batch function;
 *   cached    — the plain resolver under `@cached(ttl: 60)`, warm, with herdcacheContext() per
 *               operation (the operation's request scope and report).
 * Method as workload 3: timed in process CPU time (process.cpuUsage), loop lengths calibrated to
 * ~roundMs / 3, one warm-up round, then 3 × `rounds` rounds with the order rotated each round; each
 * mode's fastest round → µs per operation (the same method for the three schemas).
 * Each schema runs on its own copy of graphql-js (and of herdcache, bound to it), loaded afresh,
 * as each would in its own server: graphql-js's functions are compiled for what they have run,
 * and in one copy the schema timed first trains them for itself (swapping the order of plain and
 * cached moved the ratio by 0.05–0.25 in one process; a copy each ends that).
 */
import { fork } from 'node:child_process';
import { dirname, join, sep } from 'node:path';
import type DataLoaderType from 'dataloader';
import type { GraphQLObjectType } from 'graphql';
import type { Row } from '../lib/report';
import { ratio } from '../lib/stats';

export interface GraphqlInProcessOptions {
  readonly rounds: number;
  readonly roundMs: number;
  /** Child processes measured in turn (the row shows the median one). */
  readonly children: number;
}

const ITEMS = 100;
const QUERY = '{ items { id name detail { id text } } }';
type Mode = 'plain' | 'dataloader' | 'cached';
const MODES: readonly Mode[] = ['plain', 'dataloader', 'cached'];

/** graphql-js and herdcache loaded afresh (see the header): every module of theirs dropped from require's cache first. */
function freshModules() {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { moduleRoot } = require('../lib/package') as typeof import('../lib/package');
  const graphqlDir = dirname(require.resolve('graphql'));
  for (const id of Object.keys(require.cache))
    if (id.startsWith(graphqlDir + sep) || id.startsWith(moduleRoot + sep)) delete require.cache[id];
  return {
    graphql: require('graphql') as typeof import('graphql'),
    core: require(
      join(moduleRoot, moduleRoot.endsWith('dist') ? 'index.js' : 'core'),
    ) as typeof import('../../src/core'),
    g: require(join(moduleRoot, 'graphql')) as typeof import('../../src/graphql'),
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/** Runs in the child: builds the three schemas and times them. Returns µs per operation by mode. */
async function child(options: GraphqlInProcessOptions): Promise<Record<Mode, number>> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const DataLoader = require('dataloader') as typeof import('dataloader');
  type Detail = { id: string; text: string };
  const detailOf = (id: string): Detail => ({ id, text: `detail of ${id}` });
  const items = Array.from({ length: ITEMS }, (_, i) => ({ id: String(i + 1), name: `item ${i + 1}` }));

  const build = (mode: Mode, { graphql: { buildSchema }, g }: ReturnType<typeof freshModules>) => {
    const sdl = `
      type Query { items: [Item!]! }
      type Item { id: ID! name: String! detail: Detail! ${mode === 'cached' ? '@cached(ttl: 60)' : ''} }
      type Detail { id: ID! text: String! }
      ${mode === 'cached' ? g.cachedDirectiveTypeDefs : ''}
    `;
    const schema = buildSchema(sdl);
    schema.getQueryType()!.getFields().items!.resolve = () => items;
    const detail = (schema.getType('Item') as GraphQLObjectType).getFields().detail!;
    detail.resolve =
      mode === 'dataloader'
        ? (item: { id: string }, _args, context: { details: DataLoaderType<string, Detail> }) =>
            context.details.load(item.id)
        : (item: { id: string }) => detailOf(item.id);
    return schema;
  };

  const forPlain = freshModules();
  const plain = build('plain', forPlain);
  const forDataloader = freshModules();
  const dataloader = build('dataloader', forDataloader);
  const forCached = freshModules();
  const { g } = forCached;
  const cache = forCached.core.createCache();
  const cached = g.cachedDirectiveTransformer(build('cached', forCached), { cache });
  const documents = [forPlain, forDataloader, forCached].map(({ graphql }) => graphql.parse(QUERY));
  const run: Record<Mode, () => unknown> = {
    plain: () => forPlain.graphql.execute({ schema: plain, document: documents[0]! }),
    dataloader: () =>
      forDataloader.graphql.execute({
        schema: dataloader,
        document: documents[1]!,
        contextValue: { details: new DataLoader<string, Detail>(async (ids) => ids.map(detailOf)) },
      }),
    cached: () =>
      forCached.graphql.execute({
        schema: cached,
        document: documents[2]!,
        contextValue: g.herdcacheContext({ cache }),
      }),
  };
  // Checks the answer (and warms the cache) before anything is timed.
  for (const mode of MODES) {
    const result = (await run[mode]()) as { data?: { items: { detail: Detail }[] }; errors?: unknown };
    if (result.errors !== undefined || result.data?.items[ITEMS - 1]?.detail.text !== `detail of ${ITEMS}`) {
      throw new Error(`graphql-inprocess ${mode}: unexpected result ${JSON.stringify(result).slice(0, 200)}`);
    }
  }
  const hits = cache.metrics().total.hits;
  // One loop per mode (its own call site), each op awaited as a server does.
  const loops: Record<Mode, (n: number) => Promise<void>> = {
    plain: async (n) => {
      for (let i = 0; i < n; i++) await run.plain();
    },
    dataloader: async (n) => {
      for (let i = 0; i < n; i++) await run.dataloader();
    },
    cached: async (n) => {
      for (let i = 0; i < n; i++) await run.cached();
    },
  };
  // CPU time (user + system) in µs: on a shared machine wall time also counts other processes' turns.
  const timed = async (mode: Mode, n: number) => {
    const started = process.cpuUsage();
    await loops[mode](n);
    const { user, system } = process.cpuUsage(started);
    return user + system;
  };
  const roundMs = options.roundMs / 3;
  const rounds = 3 * options.rounds;
  const iterations = {} as Record<Mode, number>;
  for (const mode of MODES) {
    let n = 10;
    for (;;) {
      const us = await timed(mode, n);
      if (us >= 20_000 || n >= 100_000) {
        iterations[mode] = Math.max(10, Math.round((n * roundMs * 1e3) / us));
        break;
      }
      n *= 4;
    }
  }
  for (const mode of MODES) await timed(mode, iterations[mode]);
  const samples: Record<Mode, number[]> = { plain: [], dataloader: [], cached: [] };
  for (let round = 0; round < rounds; round++) {
    for (let j = 0; j < MODES.length; j++) {
      const mode = MODES[(round + j) % MODES.length]!;
      samples[mode].push((await timed(mode, iterations[mode])) / iterations[mode]);
    }
  }
  // Every cached op was answered from the cache: no fill happened while timing.
  const metrics = cache.metrics().total;
  if (metrics.fills !== ITEMS || metrics.hits <= hits)
    throw new Error(`graphql-inprocess: the cached schema filled ${metrics.fills} times`);
  const fastest = (values: number[]) => Math.min(...values);
  return { plain: fastest(samples.plain), dataloader: fastest(samples.dataloader), cached: fastest(samples.cached) };
}

/** One child's measurement (see child). */
function measureInChild(options: GraphqlInProcessOptions): Promise<Record<Mode, number>> {
  return new Promise<Record<Mode, number>>((resolve, reject) => {
    const worker = fork(__filename, [], {
      env: { ...process.env, NODE_ENV: 'production', HERDCACHE_BENCH_INPROCESS: JSON.stringify(options) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    worker.once('message', (m: { error?: string; result?: Record<Mode, number> }) =>
      m.error === undefined ? resolve(m.result!) : reject(new Error(m.error)),
    );
    worker.once('exit', (code) => reject(new Error(`graphql-inprocess worker exited with code ${code}`)));
  });
}

export async function graphqlInProcess(options: GraphqlInProcessOptions): Promise<Row> {
  // Several children, one after the other: how graphql-js ends up compiled varies from process to
  // process (each ratio is listed in the notes); the row shows the child with the median ratio.
  const children: Record<Mode, number>[] = [];
  for (let i = 0; i < options.children; i++) children.push(await measureInChild(options));
  const byRatio = [...children].sort((a, b) => a.cached / a.plain - b.cached / b.plain);
  const result = byRatio[(byRatio.length - 1) >> 1]!;
  const us = (x: number) => `${x.toFixed(0)} µs/op`;
  const vsPlain = result.cached / result.plain;
  const vsDl = result.cached / result.dataloader;
  return {
    workload: '7. GraphQL in process',
    measure: `graphql-js execute, ${ITEMS} items × child field, NODE_ENV=production → µs per operation (CPU time, fastest round)`,
    cells: {
      herdcache: `@cached(ttl: 60), warm: ${us(result.cached)}`,
      noCache: `plain sync resolvers: ${us(result.plain)}`,
      dataloaderPerRequest: us(result.dataloader),
      dataloaderShared: 'n/a',
      asyncCacheDedupe: 'n/a',
      bentocache: 'n/a',
      limit: `plain sync resolvers: ${us(result.plain)}`,
    },
    ratio: `${ratio(vsPlain)} plain sync (target ≤ 1.2×)<br>${ratio(vsDl)} DataLoader per request`,
    notes: [
      `One process (a child, NODE_ENV=production), no I/O: the query \`${QUERY}\` executed with graphql-js; each operation awaited. Timed in process CPU time (process.cpuUsage, user + system), not wall time; loop lengths calibrated to ~${(options.roundMs / 3).toFixed(0)} ms, 1 warm-up round, then ${3 * options.rounds} rounds, order rotated; each mode's fastest round (the same method for the three schemas).`,
      "Each schema runs on its own copy of graphql-js (and herdcache), loaded afresh, as in its own server: in one copy the schema timed first trains graphql-js's compiled code for itself (with one copy, swapping plain and cached moved the ratio by 0.05–0.25).",
      'plain: the child resolver returns `{ id, text }` synchronously. DataLoader: a new DataLoader per operation whose batch function maps the ids in memory. herdcache: the plain resolver under `@cached(ttl: 60)` (memory store, warm), context herdcacheContext({ cache }) per operation.',
      `${children.length} child process(es) in turn, each measuring the three schemas as above; @cached / plain per child: ${children.map((c) => ratio(c.cached / c.plain)).join(' / ')}; the row shows the child with the median ratio.`,
      `Target: @cached / plain ≤ 1.2×: ${vsPlain <= 1.2 ? 'met' : 'missed'} (${ratio(vsPlain)}).`,
    ],
  };
}

if (require.main === module && process.env.HERDCACHE_BENCH_INPROCESS !== undefined) {
  child(JSON.parse(process.env.HERDCACHE_BENCH_INPROCESS) as GraphqlInProcessOptions).then(
    (result) => process.send!({ result }, () => process.exit(0)),
    (error: unknown) => process.send!({ error: (error as Error).stack ?? String(error) }, () => process.exit(1)),
  );
}

/**
 * One hostile request, run in a child process (a small heap: `--max-old-space-size=512`) by
 * sizes.test.ts and by bench/hostile-keys.ts: `query($s: String) { q(l: [$s, $s, …]) }` where
 * graphql-js hands the resolver N references to one large string. Prints one JSON line: the
 * answer, the bypass reasons counted, the time and the heap after.
 *
 * argv: <cached|plain> <references> <variable length> [redis url]
 */
import { performance } from 'node:perf_hooks';
import { graphql } from 'graphql';
import Redis from 'ioredis';
import { createCache } from '../../src/core/cache';
import type { Store } from '../../src/core/store';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { herdcacheContext } from '../../src/graphql/request';
import { redisStore } from '../../src/redis/redis-store';
import { makeSchema } from '../graphql/fixtures';

async function main(): Promise<void> {
  const [mode = 'cached', refs = '2000', length = String(1 << 20), redisUrl] = process.argv.slice(2);
  const client = redisUrl === undefined ? undefined : new Redis(redisUrl, { lazyConnect: false });
  client?.on('error', () => {});
  const store: Store | undefined =
    client === undefined ? undefined : redisStore({ client, prefix: `hostile${process.pid}:` });
  const cache = createCache(store === undefined ? {} : { store });
  let calls = 0;
  const directive = mode === 'cached' ? '@cached(ttl: 60)' : '';
  const schema = makeSchema(`type Query { q(l: [String]): Int ${directive} }`, {
    Query: {
      q: (_p, { l }) => {
        calls++;
        return l.length;
      },
    },
  });
  const bypassed: string[] = [];
  if (mode === 'cached') cachedDirectiveTransformer(schema, { cache, onBypass: (_c, reason) => bypassed.push(reason) });
  const source = `query($s: String) { q(l: [${Array.from({ length: Number(refs) }, () => '$s').join(', ')}]) }`;
  const variableValues = { s: 'x'.repeat(Number(length)) };
  const started = performance.now();
  const first = await graphql({ schema, source, variableValues, contextValue: herdcacheContext({ cache }) });
  const second = await graphql({ schema, source, variableValues, contextValue: herdcacheContext({ cache }) });
  const ms = performance.now() - started;
  const storedKeyLengths =
    client === undefined ? [] : (await client.keys(`hostile${process.pid}:*`)).map((k) => k.length);
  global.gc?.();
  const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;
  const maxRssMiB = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(
    `${JSON.stringify({ data: [first.data, second.data], errors: [first.errors?.map((e) => e.message), second.errors?.map((e) => e.message)], calls, bypassed, ms, heapMiB, maxRssMiB, storedKeyLengths })}\n`,
  );
  if (client !== undefined) {
    await client.del(...(await client.keys(`hostile${process.pid}:*`)), 'none');
    client.disconnect();
  }
  await cache.close();
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

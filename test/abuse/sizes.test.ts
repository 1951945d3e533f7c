/**
 * Hostile sizes. graphql-js hands a resolver N references to one variable as N references to one
 * string: a @cached key that wrote each out would allocate N times the variable (2,000 × 1 MiB
 * aborted a 512 MiB heap). The key's encoding is bounded before it is built: such a call is
 * resolved without the cache and counted (args_too_large), as fast as the plain field; long but
 * acceptable arguments are keyed by a streamed sha256, so no store is handed a long key.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createCache } from '../../src/core/cache';
import { memoryStore } from '../../src/core/memory';
import { cachedDirectiveTransformer } from '../../src/graphql/directive';
import { ARGS_INLINE_MAX, ARGS_MAX_LENGTH, cachedFieldKey, canonicalArgs } from '../../src/graphql/keys';
import { herdcacheContext } from '../../src/graphql/request';
import { startRedisServer, type RedisServer } from '../setup/redis-server';
import { makeSchema, run } from '../graphql/fixtures';

interface ProbeResult {
  data: unknown[];
  errors: unknown[];
  calls: number;
  bypassed: string[];
  storedKeyLengths: number[];
}

/** The hostile request in a child with a 512 MiB heap, bounded in time. */
async function probe(...args: string[]): Promise<ProbeResult> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--max-old-space-size=512', '--import', 'tsx', join(__dirname, 'hostile-request.ts'), ...args],
    {
      timeout: 30_000,
      cwd: join(__dirname, '../..'),
    },
  );
  return JSON.parse(stdout.trim().split('\n').pop()!) as ProbeResult;
}

describe('one variable referenced 2,000 times (1 MiB each)', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('answers on a 512 MiB heap (memory store): resolved uncached, counted args_too_large', async () => {
    const result = await probe('cached', '2000', String(1 << 20));
    expect(result.errors).toEqual([null, null]);
    expect(result.data).toEqual([{ q: 2000 }, { q: 2000 }]);
    expect(result.calls).toBe(2);
    expect(result.bypassed).toEqual(['args_too_large', 'args_too_large']);
  });

  it('answers with the Redis store (200 references); acceptable long arguments reach Redis as a short hashed key', async () => {
    const hostile = await probe('cached', '200', String(1 << 20), server.url);
    expect(hostile.data).toEqual([{ q: 200 }, { q: 200 }]);
    expect(hostile.bypassed).toEqual(['args_too_large', 'args_too_large']);
    // 100 × 300 characters: about 30 Ki characters of arguments, under the budget: cached (one
    // call for two requests) under a key of bounded length, not the 30 Ki characters.
    const long = await probe('cached', '100', '300', server.url);
    expect(long.data).toEqual([{ q: 100 }, { q: 100 }]);
    expect(long.calls).toBe(1);
    expect(long.bypassed).toEqual([]);
    expect(long.storedKeyLengths.length).toBeGreaterThan(0);
    for (const length of long.storedKeyLengths) expect(length).toBeLessThan(200);
  });
});

describe('the byte budget', () => {
  it('streams arguments past ARGS_INLINE_MAX into a sha256 and refuses them past ARGS_MAX_LENGTH', () => {
    const short = canonicalArgs({ s: 'x'.repeat(ARGS_INLINE_MAX - 20) })!;
    expect(short.startsWith('{')).toBe(true);
    const hashed = canonicalArgs({ s: 'x'.repeat(ARGS_INLINE_MAX) })!;
    expect(hashed).toMatch(/^#[0-9a-f]{64}$/);
    // Hashed encodings stay injective: one more character, another key.
    expect(canonicalArgs({ s: 'x'.repeat(ARGS_INLINE_MAX + 1) })).not.toBe(hashed);
    // The same value split across parts differently is another value, another key.
    expect(canonicalArgs({ l: ['x'.repeat(600), 'x'.repeat(600)] })).not.toBe(
      canonicalArgs({ l: ['x'.repeat(601), 'x'.repeat(599)] }),
    );
    expect(canonicalArgs({ s: 'x'.repeat(ARGS_MAX_LENGTH) })).toBeUndefined();
    expect(canonicalArgs({ l: Array.from({ length: ARGS_MAX_LENGTH / 4 }, () => 'x') })).toBeUndefined();
    expect(() => cachedFieldKey('Query.q', { args: { s: 'x'.repeat(ARGS_MAX_LENGTH) } })).toThrow(
      /option "args".*encode past 65536 characters/,
    );
  });

  it('checks a string against the budget before writing it out (one huge reference costs no copy)', async () => {
    const cache = createCache({ store: memoryStore() });
    const reasons: string[] = [];
    let calls = 0;
    const schema = makeSchema('type Query { q(l: [String]): Int @cached(ttl: 60) }', {
      Query: {
        q: (_p, { l }) => {
          calls++;
          return l.length;
        },
      },
    });
    cachedDirectiveTransformer(schema, { cache, onBypass: (_c, reason) => reasons.push(reason) });
    const huge = 'y'.repeat(8 << 20);
    const stringify = jest.spyOn(JSON, 'stringify');
    try {
      const result = await run(schema, 'query($s: String) { q(l: [$s, $s, $s]) }', herdcacheContext({ cache }), {
        s: huge,
      });
      expect(result.data).toEqual({ q: 3 });
      expect(stringify.mock.calls.some(([value]) => value === huge)).toBe(false);
    } finally {
      stringify.mockRestore();
    }
    expect(reasons).toEqual(['args_too_large']);
    expect(calls).toBe(1);
  });
});

/**
 * On Yoga 5, an execution that never reaches useHerdcache's own hooks (a plugin before it whose
 * onExecuteDone throws: Envelop stops the chain; a plugin after it that replaces the execute
 * function with one that throws) is handed over as failed when its response leaves (Yoga's
 * onResponse; for an operation of a batch, when its own handling ends: onParams' wrapper). Before,
 * its key stayed in flight for good: every request for it waited forever; in a batch, the batch
 * itself did (its other operations waited on the key, and its response waited on them). Counted:
 * every request answers, and the key works again at once.
 */
import { buildSchema } from 'graphql';
import { createYoga, type Plugin } from 'graphql-yoga';
import { createCache } from '../../src/core/cache';
import { useHerdcache } from '../../src/envelop/plugin';

function yogaWith(plugins: (herd: Plugin) => Plugin[], batching = false) {
  const schema = buildSchema(`
    directive @cacheControl(maxAge: Int) on FIELD_DEFINITION
    type Query { a: String @cacheControl(maxAge: 30) }
  `);
  let executions = 0;
  schema.getQueryType()!.getFields().a!.resolve = async () => {
    executions++;
    await new Promise((resolve) => setTimeout(resolve, 20));
    return 'A';
  };
  const cache = createCache();
  const herd = useHerdcache({ cache, extensions: true, responseCache: true }) as Plugin;
  const yoga = createYoga({ schema, logging: false, batching, plugins: plugins(herd) });
  const ask = async () => {
    const response = await yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ a }' }),
    });
    const body = (await response.json()) as { data?: { a: string }; extensions?: { cache?: { response?: string } } };
    return {
      status: response.status,
      a: body.data?.a,
      response: body.extensions?.cache?.response,
      cacheControl: response.headers.get('cache-control'),
    };
  };
  /** `n` identical operations in one batched HTTP request: their answers (`a`, or undefined when it failed). */
  const askBatch = async (n: number) => {
    const response = await yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(Array.from({ length: n }, () => ({ query: '{ a }' }))),
    });
    return ((await response.json()) as { data?: { a: string } }[]).map((body) => body.data?.a);
  };
  return { ask, askBatch, executions: () => executions, cache };
}

/** Every answer within a bound (a hang fails the test rather than timing it out). */
async function answered<T>(work: Promise<T>[]): Promise<T[]> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('a request never answered')), 10_000);
  });
  try {
    return await Promise.race([Promise.all(work), bound]);
  } finally {
    clearTimeout(timer);
  }
}

it('an earlier plugin whose onExecuteDone throws: the waiters are answered, and the key works again', async () => {
  let fail = true;
  const buggyLogger: Plugin = {
    onExecute: () => ({
      onExecuteDone: () => {
        if (fail) {
          fail = false;
          throw new Error('logger bug');
        }
      },
    }),
  };
  const { ask, executions, cache } = yogaWith((herd) => [buggyLogger, herd]);
  const first = await answered(Array.from({ length: 3 }, () => ask()));
  // The one whose logger threw fails (Yoga's error); the two that waited on it execute again.
  expect(first.filter((r) => r.a === 'A')).toHaveLength(2);
  const again = await answered(Array.from({ length: 2 }, () => ask()));
  expect(again.map((r) => r.a)).toEqual(['A', 'A']);
  expect(executions()).toBeLessThanOrEqual(4);
  await cache.close();
});

it('a later plugin whose execute function throws: every request answers, and the key works again', async () => {
  let fail = true;
  const flakyExecute: Plugin = {
    onExecute: ({ executeFn, setExecuteFn }) => {
      setExecuteFn(async (args) => {
        if (fail) throw new Error('execute blew up');
        return executeFn(args);
      });
    },
  };
  const { ask, cache } = yogaWith((herd) => [herd, flakyExecute]);
  const first = await answered(Array.from({ length: 5 }, () => ask()));
  expect(first.every((r) => r.a === undefined)).toBe(true); // each failed: execute throws for all
  fail = false;
  const again = await answered(Array.from({ length: 2 }, () => ask()));
  expect(again.map((r) => r.a)).toEqual(['A', 'A']);
  const outcomes = again.map((r) => r.response);
  expect(outcomes.filter((o) => o === 'miss')).toHaveLength(1);
  expect(outcomes.filter((o) => o === 'coalesced' || o === 'hit')).toHaveLength(1);
  await cache.close();
});

it('a later plugin whose onExecuteDone throws: the 500 says no-store, not the policy its operation noted', async () => {
  let fail = true;
  const buggyAudit: Plugin = {
    onExecute: () => ({
      onExecuteDone: () => {
        if (fail) {
          fail = false;
          throw new Error('audit sink down');
        }
      },
    }),
  };
  const { ask, cache } = yogaWith((herd) => [herd, buggyAudit]);
  const [failed] = await answered([ask()]);
  expect(failed!.status).toBe(500);
  expect(failed!.cacheControl).toBe('no-store');
  // The next one is an ordinary answer, with its policy.
  const [next] = await answered([ask()]);
  expect(next).toMatchObject({ status: 200, a: 'A', cacheControl: 'max-age=30, public' });
  await cache.close();
});

describe('in a batched request (Yoga batching), two identical operations', () => {
  it.each(['an earlier plugin whose onExecuteDone throws', 'a later plugin whose execute function throws'])(
    '%s: the batch answers, and the key works again',
    async (what) => {
      let fail = true;
      const buggy: Plugin = what.startsWith('an earlier')
        ? {
            onExecute: () => ({
              onExecuteDone: () => {
                if (fail) {
                  fail = false;
                  throw new Error('logger bug');
                }
              },
            }),
          }
        : {
            onExecute: ({ executeFn, setExecuteFn }) => {
              setExecuteFn(async (args) => {
                if (fail) {
                  fail = false;
                  throw new Error('execute blew up');
                }
                return executeFn(args);
              });
            },
          };
      const { ask, askBatch, cache } = yogaWith(
        (herd) => (what.startsWith('an earlier') ? [buggy, herd] : [herd, buggy]),
        true,
      );
      const [batch] = await answered([askBatch(2)]);
      // The operation whose plugin failed fails; the one that waited on it executes again.
      expect(batch!.filter((a) => a === 'A')).toHaveLength(1);
      const [later] = await answered([ask()]);
      expect(later!.a).toBe('A');
      await cache.close();
    },
  );

  it("and an earlier plugin's onExecutionResult throws too (for the failed operation): the batch answers", async () => {
    let failExecute = true;
    let failResult = true;
    const auditor = {
      onExecutionResult: ({ result }: { result?: { errors?: unknown } }) => {
        if (result?.errors !== undefined && failResult) {
          failResult = false;
          throw new Error('auditor bug');
        }
      },
    } as Plugin;
    const flaky: Plugin = {
      onExecute: ({ executeFn, setExecuteFn }) => {
        setExecuteFn(async (args) => {
          if (failExecute) {
            failExecute = false;
            throw new Error('execute blew up');
          }
          return executeFn(args);
        });
      },
    };
    const { ask, askBatch, cache } = yogaWith((herd) => [auditor, herd, flaky], true);
    const [batch] = await answered([askBatch(2)]);
    expect(batch!.filter((a) => a === 'A')).toHaveLength(1);
    const [later] = await answered([ask()]);
    expect(later!.a).toBe('A');
    await cache.close();
  });

  it('without a failure, each operation of the batch is handed over by its own hooks: one execution, stored', async () => {
    const { ask, askBatch, executions, cache } = yogaWith((herd) => [herd], true);
    const [batch] = await answered([askBatch(3)]);
    expect(batch).toEqual(['A', 'A', 'A']);
    expect(executions()).toBe(1);
    const [next] = await answered([ask()]);
    expect(next).toMatchObject({ a: 'A', response: 'hit' });
    await cache.close();
  });
});

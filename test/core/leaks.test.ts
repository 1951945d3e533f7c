import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createCache } from '../../src/core';

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;

function settledHeap(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('no leaks', () => {
  it('after 100k mixed operations (success, failure, abort, invalidate) the in-flight table is empty and memory is bounded', async () => {
    const cache = createCache({ ttl: 5 });
    const users = cache.loader<number, number>({
      name: 'u',
      batch: async (ids) => ids.map((id) => (id % 7 === 0 ? new Error(`bad ${id}`) : id)),
    });
    let ok = 0;
    let failed = 0;
    let aborted = 0;
    let heapBefore = 0;
    // 20 warm-up rounds fill the store and JIT; then 100 measured rounds of 1000 operations.
    for (let round = -20; round < 100; round++) {
      if (round === 0) {
        heapBefore = settledHeap();
        ok = failed = aborted = 0;
      }
      const ops: Promise<unknown>[] = [];
      for (let i = 0; i < 1000; i++) {
        const key = (round * 1000 + i) % 3000;
        const kind = i % 5;
        if (kind === 0)
          ops.push(
            users.load(key).then(
              () => ok++,
              () => failed++,
            ),
          );
        else if (kind === 1) {
          ops.push(
            cache
              .getOrCompute(`k${key}`, async () => {
                if (key % 3 === 0) throw new Error('fill failed');
                return key;
              })
              .then(
                () => ok++,
                () => failed++,
              ),
          );
        } else if (kind === 2) {
          const controller = new AbortController();
          ops.push(
            cache
              .getOrCompute(
                `slow${key}`,
                ({ signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve(0))),
                {
                  signal: controller.signal,
                },
              )
              .then(
                () => ok++,
                () => aborted++,
              ),
          );
          controller.abort();
        } else if (kind === 3) ops.push(cache.invalidate(`k${key}`));
        else
          ops.push(
            cache
              .request()
              .loader(users)
              .load(key)
              .then(
                () => ok++,
                () => failed++,
              ),
          );
      }
      await Promise.all(ops);
    }
    expect(ok + failed + aborted).toBe(80_000);
    expect(aborted).toBe(20_000);
    expect(cache.inFlight).toBe(0);
    // Everything the operations created is collectable: the heap returns to where it was.
    const growth = settledHeap() - heapBefore;
    expect(growth).toBeLessThan(8 * 1024 * 1024);
  });
});

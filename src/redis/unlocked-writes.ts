/**
 * The writes of one setMany on one connection (redis-store), queued on its pipeline: a plain SET
 * per write, except the writes of fills made without the lock (`since` set), which must check the
 * key's invalidation marker (see WRITE_UNLESS_INVALIDATED): those go in one script call per hash
 * slot (a script may touch one slot's keys), so a loader's batch of unlocked writes is one script
 * run on a standalone server, not one per key.
 */
import { HerdcacheError, StorePartialError } from '../core/errors';
import type { StoreWrite } from '../core/store';
import { storeError } from './call-timeout';
import { groupPositions, INVALIDATED_SUFFIX } from './keys';
import type { RedisLink } from './link';
import type { ScriptPipeline } from './scripts';

function none(): void {}

/** Writes per script call at most. */
const SCRIPT_WRITES = 1_000;

/** A pipeline that takes plain SETs and the write script. */
type WritePipeline = ScriptPipeline & {
  set(key: string, value: string | Buffer, ...args: (string | number)[]): unknown;
};

/** The writes setMany sends, by position. */
export interface Writes {
  readonly keys: readonly string[];
  readonly payloads: readonly (string | Buffer)[];
  readonly pxs: readonly number[];
  readonly sinces: readonly (number | undefined)[];
}

/**
 * Queues the writes at `positions` on `pipeline`; `slotsOf` groups positions of keys by hash slot
 * (null: one server, one group). Returns the reader of the pipeline's results: per position (in
 * `positions`' order), whether it was written (a refused unlocked write: false).
 */
export function queueWrites(
  pipeline: unknown,
  positions: readonly number[],
  writes: Writes,
  slotsOf: (keys: readonly string[]) => number[][] | null,
): (results: readonly [unknown, unknown][]) => boolean[] {
  const queue = pipeline as WritePipeline;
  const { keys, payloads, pxs, sinces } = writes;
  const fenced: number[] = [];
  /** Per position in `positions`: the result's index, and for a script's write its place in the script's answer. */
  const reply: [number, number][] = new Array<[number, number]>(positions.length);
  let commands = 0;
  for (let p = 0; p < positions.length; p++) {
    const i = positions[p]!;
    if (sinces[i] !== undefined) {
      fenced.push(p);
      continue;
    }
    if (pxs[i] === 0) queue.set(keys[i]!, payloads[i]!);
    else queue.set(keys[i]!, payloads[i]!, 'PX', pxs[i]!);
    reply[p] = [commands++, -1];
  }
  if (fenced.length > 0) {
    const groups = slotsOf(fenced.map((p) => keys[positions[p]!]!)) ?? [fenced.map((_, g) => g)];
    for (const group of groups) {
      // At most SCRIPT_WRITES per call: a script runs alone on the server, keep each run short.
      for (let start = 0; start < group.length; start += SCRIPT_WRITES) {
        const end = Math.min(group.length, start + SCRIPT_WRITES);
        const args: (string | Buffer)[] = [];
        const scriptKeys: string[] = [];
        for (let g = start; g < end; g++) {
          const p = fenced[group[g]!]!;
          const i = positions[p]!;
          scriptKeys.push(keys[i]!, keys[i]! + INVALIDATED_SUFFIX);
          args.push(payloads[i]!, String(pxs[i]!), String(sinces[i]!));
          reply[p] = [commands, g - start];
        }
        // Arrays, not spread: ioredis flattens them (a spread of 60,000 keys overflows the stack).
        queue.herdcacheWriteUnlessInvalidated1(scriptKeys.length, scriptKeys, args);
        commands++;
      }
    }
  }
  return (results) =>
    reply.map(([index, place]) => {
      const answer = results[index]![1];
      return place < 0 || (Array.isArray(answer) && answer[place] === 1);
    });
}

/**
 * A setMany's writes (redis-store: the unlocked ones of a turn, gathered, or a prime), handed to
 * the client before the first await: one pipeline per master, its plain SETs and the script calls
 * of fills made without the lock. Rejects with a StorePartialError whose failedAt are positions in
 * `writes` when some Cluster masters failed (each caller of a gathered turn gets its own outcome).
 */
export async function sendWrites(link: RedisLink, writes: readonly StoreWrite[]): Promise<void> {
  const keys: string[] = [];
  const payloads: (string | Buffer)[] = [];
  const pxs: number[] = [];
  const sinces: (number | undefined)[] = [];
  /** Per key sent, the position of its write. */
  const at: number[] = [];
  for (let i = 0; i < writes.length; i++) {
    const write = writes[i]!;
    const payload = link.encode(write);
    if (payload === undefined) continue;
    at.push(i);
    keys.push(link.valueKey(write.key));
    payloads.push(payload);
    pxs.push(link.px(write));
    sinces.push(write.since);
  }
  if (keys.length === 0) return;
  // Admitted only once something will be sent (see redis-clear.ts).
  // ioredis sends a Cluster pipeline to one node only: one pipeline per master.
  const groups = link.cluster ? groupPositions(keys.length, (i) => link.nodeOf(keys[i]!)) : null;
  const client = link.client;
  const send = (indices: number[] | null) => {
    const pipeline = client.pipeline();
    const positions = indices ?? keys.map((_, i) => i);
    const written = queueWrites(pipeline, positions, { keys, payloads, pxs, sinces }, (some) => link.slotGroups(some));
    return pipeline.exec().then((result) => {
      if (result === null)
        throw new HerdcacheError('E_STORE_ERROR', 'herdcache: redis setMany failed: pipeline was discarded');
      for (const [error] of result) if (error) throw storeError('redis', 'setMany', error);
      // Written (an unlocked fill's write the script refused is not): the next read is a plain MGET.
      const took = written(result);
      for (let p = 0; p < positions.length; p++) {
        if (!took[p]) continue;
        const write = writes[at[positions[p]!]!]!;
        link.presence.saw(write.key, write.entry);
      }
    });
  };
  await link.call('setMany', keys, groups, send, none, link.sending(payloads)).catch((error: unknown) => {
    // Which writes failed (positions in `writes`), when not all of them: some Cluster masters
    // failed, or some writes were never sent (too large, unencodable: reported, not failed). Each
    // caller of a gathered turn then gets its own writes' outcome.
    const partial = error instanceof StorePartialError ? error.failedAt : undefined;
    if (partial === undefined && at.length === writes.length) throw error;
    const failed = partial === undefined ? at : partial.map((i) => at[i]!);
    throw new StorePartialError(error, undefined, (error as Error).message, failed);
  });
}

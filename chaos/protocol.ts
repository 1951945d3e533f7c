/**
 * What the chaos runner (chaos/run.ts) and its replicas (chaos/replica.ts, one Node process each)
 * say to each other over IPC: a plan for one scenario's load, and what the replica saw.
 */

/** How a replica reaches Redis: a URL, or a sentinel that names the current master. */
export type Connection =
  { readonly url: string } | { readonly sentinels: readonly { host: string; port: number }[]; readonly name: string };

export interface LoadPlan {
  readonly connection: Connection;
  /** The store's prefix: one per scenario. */
  readonly prefix: string;
  /**
   * false: the client is created at `go` and the first loads are fired while it is still
   * connecting (a deploy or an autoscale event). true: connected before `go`.
   */
  readonly connectFirst: boolean;
  readonly durationMs: number;
  /** Loads in flight at once in this replica (each a loop: load, then a short pause). */
  readonly concurrency: number;
  /** Pause between two loads of one loop, so the load is steady rather than a spin. */
  readonly thinkMs: number;
  /**
   * Every `epochMs` (wall clock, shared by every replica on this machine) the loads move to a new
   * set of `keysPerEpoch` cold keys: each epoch is a stampede of the whole fleet on new keys, and
   * a key's fills can be told apart from refills after data was lost.
   */
  readonly epochMs: number;
  readonly keysPerEpoch: number;
  /**
   * This share of the loads (0..1) goes back to a key of one of the last `revisitEpochs` epochs, as
   * hot keys are read again: a key left with a lock and no value shows up as a wait here.
   */
  readonly revisitShare: number;
  readonly revisitEpochs: number;
  /** Instead of epochs: these keys, picked at random (the planted-garbage scenarios). */
  readonly fixedKeys?: readonly string[];
  /** Loads fired at once at `go`, before the steady loops start. */
  readonly burst: number;
  readonly fillMs: number;
  /** Size of each value's payload: the eviction scenario fills memory with them. */
  readonly valueBytes: number;
  /** Each key's value carries the tag `tag:<key>`. */
  readonly tagged: boolean;
  /** Every `invalidateEveryMs`, invalidateTags of a random key's tag (0: never). */
  readonly invalidateEveryMs: number;
  /**
   * Blocks this replica's event loop for `blockLoopMs` right after a lock call has been written to
   * the socket (at most once per `blockEveryMs`): the reply is in the kernel's buffer, unread.
   */
  readonly blockLoopMs: number;
  readonly blockEveryMs: number;
  /** Cache options (lockWaitTimeout…); the store keeps its defaults. */
  readonly cache: { readonly lockWaitTimeout?: number; readonly lockTtl?: number; readonly ttl?: number };
}

export interface LoadReport {
  readonly pid: number;
  readonly loads: number;
  readonly failed: number;
  /** The first few failures, for the log. */
  readonly failures: readonly string[];
  readonly maxLatencyMs: number;
  /** Key → start times (epoch ms) of this replica's fills of it. */
  readonly fills: Readonly<Record<string, readonly number[]>>;
  /** Start times (epoch ms) of the fills made without the fill lock (lock outcome other than "won"). */
  readonly unlockedFills: readonly number[];
  /** When the client reported 'ready' (epoch ms), and when it scheduled a reconnection: [time, delay ms]. */
  readonly readyTimes: readonly number[];
  readonly reconnects: readonly (readonly [number, number])[];
  /** Times (epoch ms) of the store errors the cache reported, and how many of each code. */
  readonly storeErrorTimes: readonly number[];
  readonly storeErrorCodes: Readonly<Record<string, number>>;
  /** How many times the loop was blocked on purpose. */
  readonly blocks: number;
  /** Waits on another replica's lock that reached lockWaitTimeout (a lock whose holder was done, or gone). */
  readonly lockTimeouts: number;
}

export type ToReplica =
  { readonly type: 'prepare'; readonly plan: LoadPlan } | { readonly type: 'go' } | { readonly type: 'exit' };

export type FromReplica =
  | { readonly type: 'ready' }
  | { readonly type: 'prepared' }
  | { readonly type: 'report'; readonly report: LoadReport }
  | { readonly type: 'error'; readonly message: string };

/** The value a fill returns: the key it was asked for (a value read under another key is a failure). */
export interface ChaosValue {
  readonly key: string;
  readonly by: number;
  readonly pad: string;
}

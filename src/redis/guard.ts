/**
 * Bounds every call a networked store makes: the store must never be the outage.
 *
 * Before sending:
 * - a client that has never been ready (just created, still connecting: a deploy's first
 *   requests) is waited for, until its first `ready`, at most `readyTimeout` ms counted from the
 *   first call that had to wait. Failing those calls fast would run every replica's first burst
 *   without the fill lock and open the breaker for nothing. Past the budget, calls fail fast; and
 *   at once once a connection attempt failed (refused: Redis down at start is not waited for).
 * - a client that was ready and lost its connection fails the call at once (ioredis would
 *   otherwise queue the command offline and answer whenever it reconnects), and so does an open
 *   circuit breaker.
 * Recovery (breaker.ts): the breaker's cool-down is short and grows only while trials fail; it
 * ends the moment Redis is known to answer again: a reconnected client (its `ready`, after its
 * ready check, or a call that sees it first) closes every breaker, and the late reply of a call
 * that timed out (a stall is over) makes the next call the trial. So the fill lock is back within milliseconds of
 * Redis, not after a fixed cool-down, while a Redis that is down still costs no waiting.
 * After sending: the call is bounded by its timeout (call-timeout.ts: the command timeout, more for
 * a large payload or a reply still arriving); every outcome of an admitted call feeds the breaker.
 *
 * In a Cluster a batch is one call per hash slot group (runGroups): each group is admitted by, and
 * feeds, the breaker of the master serving it, and settles on its own, so a dead or slow master
 * costs only its own keys and recovers on its own.
 */
import { HerdcacheError } from '../core/errors';
import type { BreakerState, CircuitBreaker } from './breaker';
import { boundCall, type CallBounds } from './call-timeout';
import { listen, listenOnce, type Emitter } from './connection-events';

/** The part of an ioredis client the guard looks at. */
export interface Connection extends Emitter {
  readonly status: string;
  /** A standalone client's socket (replaced on each reconnection); none on a Cluster. */
  readonly stream?: unknown;
  connect(): Promise<unknown>;
}

export interface CallOptions {
  /**
   * Never refused by the breaker, nor counted by it: a lock release (compare-and-delete) of a lock
   * we may hold. Refusing it would leave the lock to expire by itself while every replica waits on it.
   */
  readonly releases?: boolean;
  /**
   * Called with the answer of a call that already timed out, when it finally arrives (a lock
   * acquire whose script ran after we gave up: its locks must be released). `group`: the
   * position of the group, for runGroups.
   */
  readonly onLate?: (value: unknown, group: number) => void;
  /**
   * Bytes the call sends (a write's payloads): its timeout grows by 1 ms per 4 KiB (writeTimeout),
   * so a large value is not refused for the time it takes to move, while a stalled Redis still
   * fails a small call after the command timeout.
   */
  readonly bytes?: number;
}

/** What runGroups settled: a value per group (undefined where it failed), and the first failure. */
export interface GroupOutcome<T> {
  readonly values: (T | undefined)[];
  readonly failed: number;
  readonly error: unknown;
  /** Per group, whether it failed. */
  readonly failedGroups: boolean[];
}

/** A node's breaker and failure count, for health checks. */
export interface NodeHealth {
  readonly breaker: BreakerState;
  /** Calls to this node that failed (timed out, refused, errored) since the store was created. */
  readonly failures: number;
}

const noop = (): void => {};

export class CallGuard {
  readonly #connection: Connection;
  readonly #timeout: number;
  /** The longest a call is waited for while its reply keeps arriving (see boundCall, call-timeout.ts). */
  readonly #arrivingTimeout: number;
  readonly #readyTimeout: number;
  readonly #breaker: CircuitBreaker | undefined;
  /** Makes one breaker per Cluster master (undefined: no breaker). */
  readonly #newBreaker: (() => CircuitBreaker) | undefined;
  readonly #nodes = new Map<string, { breaker: CircuitBreaker | undefined; failures: number }>();
  readonly #name: string;
  /** Whether the client has ever been ready: only then is "not ready" an outage. */
  #wasReady: boolean;
  /**
   * The client, never ready, has failed a connection attempt (its `close`: refused, reset, timed
   * out): Redis is down, not still being connected to, so calls fail fast instead of waiting.
   */
  #connectFailed = false;
  /** Until when calls wait for the first `ready` (set by the first call that waits). */
  #readyDeadline = 0;
  #firstReady: Promise<boolean> | undefined;
  /** A call saw the client not connected: the next call to see it ready closes the breakers. */
  #wasDown = false;
  /** The socket of a standalone client when a call or its `ready` last saw it ready: a new one is a reconnection. */
  #stream: unknown;
  /** A call acted on a reconnection before the client's `ready` of it (emitted a tick after the status). */
  #readyHandled = false;
  /** Removes the guard's `ready` listener (close()). */
  #offReady: (() => void) | undefined;
  /** Removes the guard's `close` listener of a client not ready yet (close()). */
  #offClose: (() => void) | undefined;
  /** Called (in a microtask) when a call finds the client reconnected: the fill lock re-sends its recent releases. */
  onReconnect: (() => void) | undefined;
  /** Called with the error of every call the client rejected (not a timeout): READONLY reconnects it (reconnect.ts). */
  onReplyError: ((error: unknown) => void) | undefined;

  constructor(
    name: string,
    connection: Connection,
    timeout: number,
    readyTimeout: number,
    newBreaker: (() => CircuitBreaker) | undefined,
    arrivingTimeout = timeout,
  ) {
    const breaker = newBreaker?.();
    this.#newBreaker = newBreaker;
    this.#name = name;
    this.#connection = connection;
    this.#timeout = timeout;
    this.#arrivingTimeout = Math.max(timeout, arrivingTimeout);
    this.#readyTimeout = readyTimeout;
    this.#breaker = breaker;
    this.#wasReady = connection.status === 'ready';
    if (this.#wasReady) this.#stream = connection.stream;
    // Shared by every store on the client (connection-events.ts): twenty stores, one listener.
    this.#offReady = listen(connection, 'ready', () => this.#onReady());
    if (!this.#wasReady)
      this.#offClose = listenOnce(connection, 'close', () => {
        this.#offClose = undefined;
        this.#connectFailed = true;
      });
  }

  /** Stops listening to the client (the store's close()); calls still notice a reconnection themselves (#check). */
  close(): void {
    this.#offReady?.();
    this.#offReady = undefined;
    this.#offClose?.();
    this.#offClose = undefined;
  }

  /**
   * Whether a call waits for the client's first `ready`: never ready yet, still connecting for the
   * first time (no attempt failed: a down Redis is not waited for, see #connectFailed), and a budget.
   */
  #waitsFirstReady(status: string): boolean {
    if (status === 'ready' || this.#wasReady || status === 'end' || this.#readyTimeout <= 0) return false;
    // A failure seen in the status: one that came before this guard was made, or before its `close`.
    if (status === 'reconnecting' || status === 'close') this.#connectFailed = true;
    return !this.#connectFailed;
  }

  /**
   * The client's `ready`, first or after a reconnection (ready check passed). A reconnection is
   * acted on now (breakers closed, onReconnect), not at the next call: a replica idle on Redis may
   * make none for long, and the lock releases it re-sends are what other replicas' loads wait on.
   * Once per connection: a call that saw the new connection first (#check) has acted already.
   */
  #onReady(): void {
    const again = this.#wasReady;
    this.#wasReady = true;
    if (this.#readyHandled) {
      this.#readyHandled = false;
      return;
    }
    const stream = this.#connection.stream;
    if (stream !== undefined) {
      if (stream === this.#stream) return;
      this.#stream = stream;
    }
    if (again || this.#wasDown) this.#reconnected();
  }

  /** The worst state of the store's breaker and of every Cluster master's: which one, nodeHealth() says. */
  get breakerState(): BreakerState | 'disabled' {
    if (this.#breaker === undefined) return 'disabled';
    let worst = this.#breaker.state;
    for (const { breaker } of this.#nodes.values()) {
      const state = breaker?.state;
      if (state === 'open') return 'open';
      if (state === 'half-open') worst = 'half-open';
    }
    return worst;
  }

  /** Per Cluster master seen so far ("host:port"): its breaker and its failed calls. */
  nodeHealth(): Record<string, NodeHealth> {
    const out: Record<string, NodeHealth> = {};
    for (const [node, state] of this.#nodes)
      out[node] = { breaker: state.breaker?.state ?? 'closed', failures: state.failures };
    return out;
  }

  /**
   * Cluster: sends `count` calls at once, group g to the master `nodeOf(g)`, each admitted by that
   * master's breaker and bounded on its own. Never rejects: a group that fails leaves undefined.
   */
  runGroups<T>(
    op: string,
    count: number,
    nodeOf: (group: number) => string,
    send: (group: number) => Promise<T>,
    options?: CallOptions,
  ): Promise<GroupOutcome<T>> {
    if (this.#waitsFirstReady(this.#connection.status)) {
      return this.#waitFirstReady().then(() => this.#sendGroups(op, count, nodeOf, send, options));
    }
    return this.#sendGroups(op, count, nodeOf, send, options);
  }

  async #sendGroups<T>(
    op: string,
    count: number,
    nodeOf: (group: number) => string,
    send: (group: number) => Promise<T>,
    options: CallOptions | undefined,
  ): Promise<GroupOutcome<T>> {
    const releases = options?.releases === true;
    const onLate = options?.onLate;
    const values = new Array<T | undefined>(count);
    const errors = new Array<unknown>(count);
    const pending: Promise<void>[] = [];
    for (let g = 0; g < count; g++) {
      const node = nodeOf(g);
      const health = this.#node(node);
      const breaker = releases ? undefined : health.breaker;
      const on = `${op} on ${node}`;
      try {
        this.#check(on, breaker);
      } catch (error) {
        health.failures++;
        errors[g] = error;
        continue;
      }
      const late = onLate === undefined ? undefined : (value: unknown) => onLate(value, g);
      pending.push(
        boundCall(this.#bounds(), on, send(g), breaker, late, options?.bytes).then(
          (value) => {
            values[g] = value;
          },
          (error: unknown) => {
            health.failures++;
            errors[g] = error;
          },
        ),
      );
    }
    await Promise.all(pending);
    let failed = 0;
    let error: unknown;
    const failedGroups = new Array<boolean>(count).fill(false);
    for (let g = 0; g < count; g++) {
      if (!(g in errors)) continue;
      failedGroups[g] = true;
      if (failed++ === 0) error = errors[g];
    }
    return { values, failed, error, failedGroups };
  }

  #node(node: string): { breaker: CircuitBreaker | undefined; failures: number } {
    let health = this.#nodes.get(node);
    if (health === undefined) {
      health = { breaker: this.#newBreaker?.(), failures: 0 };
      this.#nodes.set(node, health);
    }
    return health;
  }

  #waitFirstReady(): Promise<boolean> {
    const connection = this.#connection;
    if (this.#readyDeadline === 0) this.#readyDeadline = Date.now() + this.#readyTimeout;
    const left = this.#readyDeadline - Date.now();
    if (left <= 0) return Promise.resolve(false);
    // A lazyConnect client is started as ioredis would on its first command.
    if (connection.status === 'wait') connection.connect().catch(noop);
    return (this.#firstReady ??= new Promise<boolean>((resolve) => {
      const settle = (ready: boolean): void => {
        offReady();
        offEnd();
        offClose();
        clearTimeout(timer);
        resolve(ready);
      };
      const offReady = listenOnce(connection, 'ready', () => settle(true));
      // A client that gives up (its retryStrategy said stop, or it was closed) will never be
      // ready: the loads waiting for it are computed now, not at the deadline.
      const offEnd = listenOnce(connection, 'end', () => settle(false));
      // An attempt that failed (Redis refused, reset, unreachable): Redis is down, not slow to
      // connect to; the loads are computed now, as with a Redis that went down (#connectFailed).
      const offClose = listenOnce(connection, 'close', () => settle(false));
      // Not unref'd: a load is waiting on it (a script whose only work is that load would exit
      // with the load never settled).
      const timer = setTimeout(() => settle(false), left);
    }));
  }

  /**
   * Sends `send()` once admitted, bounded by the command timeout. On a client not yet ready for
   * the first time, waits for it first (see the file comment); the command is not handed to
   * ioredis before, so nothing queues offline.
   */
  run<T>(op: string, send: () => Promise<T>, options?: CallOptions): Promise<T> {
    // 'end': the client gave up (or was closed) before it ever connected: nothing to wait for.
    if (this.#waitsFirstReady(this.#connection.status)) return this.#afterFirstReady(op, send, options);
    const breaker = options?.releases === true ? undefined : this.#breaker;
    try {
      this.#check(op, breaker);
    } catch (error) {
      return Promise.reject(error);
    }
    const pending = send();
    return boundCall(this.#bounds(), op, pending, breaker, options?.onLate, options?.bytes);
  }

  async #afterFirstReady<T>(op: string, send: () => Promise<T>, options: CallOptions | undefined): Promise<T> {
    await this.#waitFirstReady();
    // Ready now, or the budget is spent: from here on, the usual rules (fail fast if not ready).
    const breaker = options?.releases === true ? undefined : this.#breaker;
    this.#check(op, breaker);
    const pending = send();
    return boundCall(this.#bounds(), op, pending, breaker, options?.onLate, options?.bytes);
  }

  #reconnected(): void {
    this.#wasDown = false;
    this.#breaker?.success();
    for (const health of this.#nodes.values()) health.breaker?.success();
    const onReconnect = this.onReconnect;
    if (onReconnect !== undefined) queueMicrotask(onReconnect);
  }

  /**
   * Throws instead of letting `op` send when `breaker` is open or the client is not connected.
   * A client seen not connected and now ready again has reconnected and passed its ready check
   * (ioredis answers 'ready' only then): that is the probe, every breaker closes, and this call and
   * the next ones take the lock path at once instead of after the cool-down.
   */
  #check(op: string, breaker: CircuitBreaker | undefined): void {
    const status = this.#connection.status;
    if (status !== 'ready') {
      // Not sent (and counted against the breaker): the next call to see the client ready closes
      // the breakers, whether or not it had been ready before (Redis down at start, a client given
      // closed and connected later: their breakers opened while it never was).
      this.#wasDown = true;
    } else {
      // Also after close(), when no `ready` is heard.
      this.#wasReady = true;
      // A reconnection no call saw happen (it was quick: a failover's disconnect) shows as a new socket.
      const stream = this.#connection.stream;
      if (stream !== this.#stream) {
        if (this.#stream !== undefined) this.#wasDown = true;
        this.#stream = stream;
      }
      if (this.#wasDown) {
        // Its `ready` is still to come (a tick after the status): not acted on twice.
        this.#readyHandled = this.#offReady !== undefined;
        this.#reconnected();
      }
    }
    if (breaker !== undefined && !breaker.admit()) {
      throw new HerdcacheError(
        'E_CIRCUIT_OPEN',
        `herdcache: ${this.#name} ${op} not sent: circuit breaker open after repeated failures`,
      );
    }
    if (status !== 'ready') {
      if (status === 'wait') this.#connection.connect().catch(noop);
      breaker?.failure();
      throw new HerdcacheError(
        'E_STORE_UNAVAILABLE',
        `herdcache: ${this.#name} ${op} not sent: client status is "${status}"`,
      );
    }
  }

  /** What bounds a call sent now (call-timeout.ts): the socket is the one it goes out on. */
  #bounds(): CallBounds {
    return {
      name: this.#name,
      timeout: this.#timeout,
      arrivingTimeout: this.#arrivingTimeout,
      socket: this.#connection.stream,
      onReplyError: (error) => this.onReplyError?.(error),
    };
  }
}

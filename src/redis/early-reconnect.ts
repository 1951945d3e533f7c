/**
 * ioredis reconnects on its `retryStrategy`'s schedule, and its default backs off to 2 s between
 * attempts: a Redis that answers again can wait up to 2 s for its clients, and meanwhile every
 * replica fills every miss without the lock (the store fails fast while its client is not ready).
 * The one-fill guarantee would be back only when ioredis next tries.
 *
 * So while a client waits longer than `after` ms for its next attempt, the store probes the
 * server's port (a TCP connect, every `interval` ms, one at a time) and, once it accepts, starts
 * the attempt at once with `client.connect()`, as ioredis's own timer would (that timer then finds
 * the client connecting or ready, and its attempt is refused and ignored by ioredis). An attempt
 * that fails puts the client back to waiting, and the probe goes on. One probe per client, however
 * many stores share it; it stops with the last of them (close()) and never keeps the process alive.
 *
 * Only for a client given a host and port, or a Unix socket path: a Sentinel's master and a
 * Cluster's nodes are found by ioredis itself, so there is no one address to probe.
 */
import { connect as netConnect } from 'node:net';
import { listen, type Emitter } from './connection-events';

/** The part of an ioredis client this looks at. */
export interface Reconnecting extends Emitter {
  readonly status: string;
  readonly isCluster?: boolean;
  readonly options?: {
    readonly host?: string;
    readonly port?: number;
    readonly path?: string;
    readonly sentinels?: unknown;
  };
  connect(): Promise<void>;
}

/** Where a probe connects. */
export type ProbeTarget = { readonly host: string; readonly port: number } | { readonly path: string };

export interface EarlyReconnectOptions {
  /** Reconnect delays up to this (ms) are left to ioredis. Default 200. */
  readonly after?: number;
  /** Ms between two probes. Default 100. */
  readonly interval?: number;
  /** Whether the server accepts connections (default: a TCP or Unix socket connect, 250 ms at most). */
  readonly probe?: (target: ProbeTarget) => Promise<boolean>;
}

interface Shared {
  users: number;
  readonly stop: () => void;
}

const byClient = new WeakMap<Reconnecting, Shared>();

/** Starts the early reconnection of `client` (see the file comment); returns this user's release. */
export function reconnectEarly(client: Reconnecting, options: EarlyReconnectOptions = {}): () => void {
  const target = probeTarget(client);
  if (target === undefined) return () => {};
  let shared = byClient.get(client);
  if (shared === undefined) {
    shared = { users: 0, stop: watch(client, target, options) };
    byClient.set(client, shared);
  }
  shared.users++;
  let released = false;
  const own = shared;
  return () => {
    if (released) return;
    released = true;
    if (--own.users > 0) return;
    own.stop();
    if (byClient.get(client) === own) byClient.delete(client);
  };
}

function probeTarget(client: Reconnecting): ProbeTarget | undefined {
  if (client.isCluster === true) return undefined;
  const options = client.options;
  if (options === undefined || options === null || typeof client.connect !== 'function') return undefined;
  if (Array.isArray(options.sentinels) && options.sentinels.length > 0) return undefined;
  if (typeof options.path === 'string' && options.path !== '') return { path: options.path };
  return { host: options.host ?? 'localhost', port: options.port ?? 6379 };
}

function watch(client: Reconnecting, target: ProbeTarget, options: EarlyReconnectOptions): () => void {
  const after = options.after ?? 200;
  const interval = options.interval ?? 100;
  const probe = options.probe ?? tcpProbe;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  const stopProbing = () => {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };
  const tick = () => {
    if (client.status !== 'reconnecting') return stopProbing();
    if (probing) return;
    probing = true;
    probe(target).then(
      (accepts) => {
        probing = false;
        if (!accepts || timer === undefined || client.status !== 'reconnecting') return;
        stopProbing();
        // Refused (and ignored) if ioredis's own attempt started meanwhile; a failure reschedules.
        client.connect().catch(() => {});
      },
      () => {
        probing = false;
      },
    );
  };
  const removals = [
    listen(client, 'reconnecting', (delay: unknown) => {
      if (typeof delay !== 'number' || !(delay > after) || timer !== undefined) return;
      timer = setInterval(tick, interval);
      timer.unref();
    }),
    listen(client, 'connect', stopProbing),
    listen(client, 'end', stopProbing),
  ];
  return () => {
    stopProbing();
    for (const remove of removals) remove();
  };
}

/** Whether a connection to `target` is accepted within 250 ms (nothing is sent; it is closed at once). */
export function tcpProbe(target: ProbeTarget): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = 'path' in target ? netConnect({ path: target.path }) : netConnect(target.port, target.host);
    let settled = false;
    const end = (accepts: boolean) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(accepts);
    };
    socket.setTimeout(250, () => end(false));
    socket.once('connect', () => end(true));
    socket.once('error', () => end(false));
    socket.unref();
  });
}

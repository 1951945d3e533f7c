/**
 * A client connected to a master that was demoted stays connected: the server, now a replica,
 * answers reads and refuses every write with READONLY, the lock scripts included. That happens
 * when the failover is not Sentinel's (which disconnects the old master's clients): a DNS name that
 * moves to the promoted node (ElastiCache, MemoryDB, Azure and most managed Redis), an operator's
 * `REPLICAOF`. ioredis does not reconnect by itself (its `reconnectOnError` option is off by
 * default), so the fleet would fill every miss without the lock until the connection happens to
 * drop: the one-fill guarantee lost for good, not for a second.
 *
 * So a store call answered READONLY reconnects the client (`disconnect(true)`: ioredis reconnects
 * through its retryStrategy, resolving the name or asking the sentinels again, and re-sends the
 * commands in flight). Meanwhile calls fail fast as for any disconnection (guard.ts), and the
 * reconnection, seen by the guard, closes the breakers. At most once per connection and once per
 * `minInterval`: a node that is a replica for good (a client pointed at one) costs one
 * reconnection a second, not one per call. Not for a Cluster: a READONLY there is a node's, and
 * ioredis follows the cluster's own redirections.
 */

/** The part of an ioredis client this looks at. */
export interface Reconnectable {
  readonly status: string;
  readonly stream?: unknown;
  readonly isCluster?: boolean;
  disconnect(reconnect?: boolean): void;
}

/** Least time between two reconnections asked for here, ms. */
export const READONLY_RECONNECT_INTERVAL = 1000;

/** Whether `error` is Redis's READONLY reply (a write sent to a replica), as ioredis rejects with it. */
export function isReadOnly(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('READONLY');
}

/**
 * Returns what the guard calls with every error a store call got from the client: a READONLY
 * reconnects it (see the file comment). Undefined for a Cluster.
 */
export function reconnectOnReadOnly(
  client: Reconnectable,
  minInterval: number = READONLY_RECONNECT_INTERVAL,
  now: () => number = Date.now,
): ((error: unknown) => void) | undefined {
  if (client.isCluster === true) return undefined;
  let last = -Infinity;
  let stream: unknown;
  return (error) => {
    if (!isReadOnly(error) || client.status !== 'ready') return;
    // This connection was asked to reconnect already (the replies of its other calls follow).
    if (client.stream === stream) return;
    const at = now();
    if (at - last < minInterval) return;
    last = at;
    stream = client.stream;
    client.disconnect(true);
  };
}

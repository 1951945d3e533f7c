/**
 * A TCP proxy on a free loopback port that plays a DNS name in a failover: each new connection is
 * forwarded to the port `target` names when it opens, so moving `target` moves the name while the
 * connections already open stay with the old server (as clients of a managed Redis stay connected
 * to a demoted master). Used by test/redis/readonly-reconnect.test.ts and the chaos suite.
 */
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

export interface SwitchingProxy {
  readonly port: number;
  /** Where new connections go (a port on 127.0.0.1). */
  target: number;
  /** Closes the proxy and every connection through it. */
  close(): Promise<void>;
}

export async function switchingProxy(target: number): Promise<SwitchingProxy> {
  const sockets = new Set<Socket>();
  const server = createServer((downstream) => {
    const upstream = createConnection(proxy.target, '127.0.0.1');
    sockets.add(downstream).add(upstream);
    downstream.pipe(upstream).pipe(downstream);
    const end = (): void => {
      sockets.delete(upstream);
      sockets.delete(downstream);
      upstream.destroy();
      downstream.destroy();
    };
    upstream.on('close', end).on('error', end);
    downstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: SwitchingProxy = {
    port: (server.address() as AddressInfo).port,
    target,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  return proxy;
}

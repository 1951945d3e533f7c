/**
 * Spawns a throwaway redis-server from PATH on a free loopback port: no RDB, no AOF.
 * Used by the jest global setup, by fault tests that need to kill and restart Redis, and by the
 * chaos suite (chaos/), which also starts replicas (`--replicaof`) and sentinels (`sentinel`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect } from 'node:net';

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly process: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface StartOptions {
  /** Default: a free port. */
  port?: number;
  extraArgs?: string[];
  /**
   * Runs `redis-server <configFile> --sentinel`. A sentinel rewrites its config file (it records
   * what it learns), so the file must be writable and belong to this server alone.
   */
  sentinelConfig?: string;
}

/**
 * A crashed test run (an unhandled rejection ends jest at once) skips every teardown, and the
 * servers it started would run on. A detached watchdog kills the server when the process that
 * started it is gone; it ends with the server.
 */
function outliveGuard(serverPid: number): void {
  const watch = `const [owner, server] = process.argv.slice(1).map(Number);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
setInterval(() => {
  if (!alive(server)) process.exit(0);
  if (!alive(owner)) { try { process.kill(server, 'SIGKILL'); } catch {} process.exit(0); }
}, 500);`;
  spawn(process.execPath, ['-e', watch, String(process.pid), String(serverPid)], {
    detached: true,
    stdio: 'ignore',
  }).unref();
}

export async function startRedisServer(options: StartOptions = {}): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const child = spawn(
    'redis-server',
    [
      ...(options.sentinelConfig === undefined ? [] : [options.sentinelConfig, '--sentinel']),
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
      ...(options.extraArgs ?? []),
    ],
    { stdio: 'ignore' },
  );
  if (child.pid !== undefined) outliveGuard(child.pid);
  let exited = false;
  const spawnError = new Promise<never>((_, reject) => {
    child.once('error', (err) =>
      reject(new Error(`could not start redis-server from PATH (${err.message}); install it or set REDIS_URL`)),
    );
  });
  child.once('exit', () => {
    exited = true;
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (await Promise.race([canConnect(port), spawnError])) break;
    if (exited) throw new Error(`redis-server exited before listening on port ${port}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not listen on port ${port} within 10 s`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    process: child,
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (exited) return Promise.resolve();
      return new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill(signal);
      });
    },
  };
}

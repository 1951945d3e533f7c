/**
 * Starts one real redis-server for the whole run (no persistence, free port on 127.0.0.1),
 * unless REDIS_URL is already set. Tests read REDIS_URL; workers inherit it.
 * A missing redis-server is an error, not a skip: Redis behaviour is never mocked.
 */
import { startRedisServer } from './redis-server';

export default async function globalSetup(): Promise<void> {
  if (process.env.REDIS_URL) return;
  const server = await startRedisServer();
  process.env.REDIS_URL = server.url;
  process.env.HERDCACHE_TEST_REDIS_PID = String(server.pid);
  (globalThis as { __herdcacheRedis?: unknown }).__herdcacheRedis = server;
}

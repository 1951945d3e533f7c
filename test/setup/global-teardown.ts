import type { RedisServer } from './redis-server';

export default async function globalTeardown(): Promise<void> {
  const server = (globalThis as { __herdcacheRedis?: RedisServer }).__herdcacheRedis;
  if (server) await server.stop();
}

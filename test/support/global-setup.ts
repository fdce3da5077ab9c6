import { redisServerBinary } from './redis-server.js';

/**
 * Vitest global setup: the integration tests start their own `redis-server`
 * processes, so stop the whole run up front, with the install hint, when the
 * binary is missing instead of failing every file on its own.
 */
export default function setup(): void {
  redisServerBinary();
}

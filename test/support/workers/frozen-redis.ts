/**
 * Starts a throwaway redis-server, freezes it (SIGSTOP), prints its pid and
 * ends without stopping it: the exit hook of redis-server.ts must still kill
 * the frozen server.
 *
 * Usage: node --import @swc-node/register/esm-register frozen-redis.ts
 */
import { startRedisServer } from '../redis-server.js';

const server = await startRedisServer();
await server.freeze();
process.stdout.write(`${JSON.stringify({ pid: server.pid() })}\n`);

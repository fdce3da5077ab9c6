/**
 * Takes a lock with a short watchdog lease (or bound to a process session)
 * and keeps it until it is killed, so a test can SIGKILL a holder. Prints
 * "acquired <fencing token>" once it holds it. Imports only the service and
 * the backend, so that it starts quickly.
 *
 * Usage: node --import @swc-node/register/esm-register doomed-holder.ts <redis url> <key> <watchdog lease ms> [<session ttl ms> [free-on-disconnect]]
 */
import { Redis } from 'ioredis';
import { RedisLockBackend } from '../../src/backends/redis/redis-lock-backend.js';
import { LockService } from '../../src/lock-service/lock.service.js';

const [url, key, leaseMs, sessionTtl, mode] = process.argv.slice(2);
const client = new Redis(url, { maxRetriesPerRequest: 1 });
const locks = new LockService({
  backend: new RedisLockBackend({
    client,
    ownsClient: true,
    freeOnDisconnect: mode === 'free-on-disconnect',
  }),
  keyPrefix: 'lock:',
  watchdogLeaseTime: Number(leaseMs),
  sessionTtl: sessionTtl === undefined ? undefined : Number(sessionTtl),
  waitTime: 10_000,
  maxKeyLength: 512,
});
const handle = await locks.acquire(key);
process.stdout.write(`acquired ${await handle.fence()}\n`);
await new Promise(() => undefined);

/**
 * Takes a lock with a short watchdog lease (or bound to a process session)
 * and keeps it until it is killed, so a test can SIGKILL a holder. Prints
 * "acquired <fencing token>" once it holds it. Imports only the service and
 * the backend, so that it starts quickly.
 *
 * With QUEUED=<n> in its environment, it then queues n more acquisitions of
 * the same key behind its own hold, and prints "queued" once Redis has them.
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
const queued = Number(process.env.QUEUED ?? 0);
for (let i = 0; i < queued; i += 1)
  void locks.acquire(key, { waitTime: 60_000 }).catch(() => undefined);
if (queued > 0) {
  const queue = `lock:{${key}}:queue`;
  while (Number(await client.llen(queue)) < queued)
    await new Promise((resolve) => setTimeout(resolve, 20));
  process.stdout.write('queued\n');
}
await new Promise(() => undefined);

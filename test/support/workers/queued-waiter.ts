/**
 * Queues for a lock and then just waits, so a test can SIGKILL this process
 * while it sits in the queue. Prints "waiting" once its acquisition is sent.
 *
 * Usage: node --import @swc-node/register/esm-register queued-waiter.ts <redis url> <key> <handoff lease ms>
 */
import { createLockService } from '../lock-fixtures.js';

const [url, key, handoffLeaseMs] = process.argv.slice(2);
const { locks } = createLockService(url, {
  handoffLeaseMs: Number(handoffLeaseMs),
});
const acquisition = locks.acquire(key, { waitTime: 60_000 });
process.stdout.write('waiting\n');
await acquisition;
process.stdout.write('acquired\n');
await new Promise(() => undefined);

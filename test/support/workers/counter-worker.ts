/**
 * A separate OS process that increments a Redis counter with a deliberately
 * non-atomic read-modify-write, under the lock (or without it, to show the test
 * can fail). Prints one JSON line: the fencing tokens it saw.
 *
 * All workers of a run wait at a barrier (a Redis counter) before their first
 * increment, so they really run at the same time however long each took to start.
 *
 * Usage: node --import @swc-node/register/esm-register counter-worker.ts <redis url> <iterations> <lock|nolock> <workers>
 */
import { Redis } from 'ioredis';
import { createLockService, sleep } from '../lock-fixtures.js';

const [url, iterationsText, mode, workersText] = process.argv.slice(2);
const iterations = Number(iterationsText);
const workers = Number(workersText ?? 1);
const counter = new Redis(url);
const { locks, close } = createLockService(url, { waitTime: 30_000 });
const fencingTokens: number[] = [];

async function increment(): Promise<void> {
  const value = Number((await counter.get('counter')) ?? 0);
  await sleep(1);
  await counter.set('counter', value + 1);
}

await counter.incr('counter:ready');
const barrierDeadline = Date.now() + 60_000;
while (
  Number(await counter.get('counter:ready')) < workers &&
  Date.now() < barrierDeadline
) {
  await sleep(2);
}

for (let i = 0; i < iterations; i++) {
  if (mode === 'lock') {
    await locks.using('counter', async (lock) => {
      fencingTokens.push(await lock.fence());
      await increment();
    });
  } else {
    await increment();
  }
}
process.stdout.write(`${JSON.stringify({ fencingTokens })}\n`);
await close();
counter.disconnect();

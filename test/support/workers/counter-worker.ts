/**
 * A separate OS process that increments a Redis counter with a deliberately
 * non-atomic read-modify-write, under the lock (or without it, to show the test
 * can fail). Prints one JSON line: the fencing tokens it saw.
 *
 * Usage: node --import @swc-node/register/esm-register counter-worker.ts <redis url> <iterations> <lock|nolock>
 */
import { Redis } from 'ioredis';
import { createLockService, sleep } from '../lock-fixtures.js';

const [url, iterationsText, mode] = process.argv.slice(2);
const iterations = Number(iterationsText);
const counter = new Redis(url);
const { locks, close } = createLockService(url, { waitTime: 30_000 });
const fencingTokens: number[] = [];

async function increment(): Promise<void> {
  const value = Number((await counter.get('counter')) ?? 0);
  await sleep(Math.random() < 0.5 ? 0 : 1);
  await counter.set('counter', value + 1);
}

for (let i = 0; i < iterations; i++) {
  if (mode === 'lock') {
    await locks.using('counter', async (lock) => {
      fencingTokens.push(lock.fencingToken);
      await increment();
    });
  } else {
    await increment();
  }
}
process.stdout.write(`${JSON.stringify({ fencingTokens })}\n`);
await close();
counter.disconnect();

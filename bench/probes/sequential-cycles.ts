/**
 * Sequential acquire + release cycles of several contenders in ONE process,
 * taking turns of 500 cycles, 40 turns each: per contender the median µs per
 * cycle and the process's CPU µs per cycle over its turns. A probe for
 * finding where a few µs go, not a benchmark: contenders share the process,
 * so what one of them switches on (an AsyncLocalStorage) slows the others
 * too. `npm run bench` measures each in a process of its own.
 *
 *   node --import @swc-node/register/esm-register bench/probes/sequential-cycles.ts \
 *     raw ours-service ours-service-uncoalesced ours-decorator
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:seq:*`.
 * With TOUCH_SCOPE=1 the process first runs one `AsyncLocalStorage.run`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { contender, openContender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { median } from '../stats.js';
import { probeArguments, rotatingKeys, sequentialCycles } from './cycles.js';

const { url, ids } = probeArguments('sequential-cycles.ts');
if (process.env.TOUCH_SCOPE) {
  const storage = new AsyncLocalStorage<object>();
  await storage.run({}, async () => {
    await Promise.resolve();
  });
  storage.disable();
}

const nextKey = rotatingKeys('probe:seq');

const locks: ContenderInstance[] = [];
for (const id of ids) locks.push(await openContender(id, { urls: [url] }));
for (const lock of locks) await sequentialCycles(lock, nextKey, 2000);
const turns = ids.map(() => ({ us: [] as number[], cpuUs: [] as number[] }));
for (let turn = 0; turn < 40; turn++) {
  for (const [i, lock] of locks.entries()) {
    const { us, cpuUs } = await sequentialCycles(lock, nextKey, 500);
    turns[i]!.us.push(us);
    turns[i]!.cpuUs.push(cpuUs);
  }
}
for (const [i, id] of ids.entries()) {
  const { us, cpuUs } = turns[i]!;
  process.stdout.write(
    `${contender(id).label.padEnd(42)} ${median(us).toFixed(1).padStart(7)} µs/cycle  ${median(cpuUs).toFixed(1).padStart(7)} µs CPU/cycle\n`,
  );
}
for (const lock of locks) await lock.close();

/**
 * Where a sequential cycle's time goes, per contender, in ONE process: for
 * the acquisition and the release apart, the median µs before the call
 * hands its command to ioredis ("before"), from there until ioredis settles
 * the command's promise ("round trip": encoding, the socket write, Redis,
 * the reply's parsing), and from there until the caller has its answer
 * ("after"). Contenders take turns of 300 cycles, 50 turns each (the first
 * 5 unmeasured). A probe for finding where a few µs go, not a benchmark:
 * `npm run bench` measures each contender in a process of its own.
 *
 *   node --import @swc-node/register/esm-register bench/probes/cycle-phases.ts \
 *     raw ours-service
 *
 * With `taskset`, as bench A places them: Redis on CPU 0
 * (`taskset -pc 0 <redis pid>`), the probe on CPU 1 (`taskset -c 1 node ...`).
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:phases:*`.
 */
import { Redis } from 'ioredis';
import { openContender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { median } from '../stats.js';
import { probeArguments, rotatingKeys } from './cycles.js';

const { url, ids } = probeArguments('cycle-phases.ts');

// The moments the last command was handed to ioredis and answered.
let handedAt = 0;
let answeredAt = 0;
let commands = 0;
const sendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (
  this: Redis,
  ...args: Parameters<Redis['sendCommand']>
) {
  handedAt = performance.now();
  commands += 1;
  const sent = sendCommand.apply(this, args);
  args[0].promise.then(
    () => (answeredAt = performance.now()),
    () => undefined,
  );
  return sent;
};

interface Phases {
  readonly before: number[];
  readonly roundTrip: number[];
  readonly after: number[];
}
const phases = (): Phases => ({ before: [], roundTrip: [], after: [] });
const record = (into: Phases, start: number, end: number) => {
  into.before.push(handedAt - start);
  into.roundTrip.push(answeredAt - handedAt);
  into.after.push(end - answeredAt);
};

const nextKey = rotatingKeys('probe:phases');
const locks: ContenderInstance[] = [];
for (const id of ids) locks.push(await openContender(id, { urls: [url] }));
const measured = ids.map(() => ({
  acquire: phases(),
  release: phases(),
  commands: 0,
  cycles: 0,
}));
for (let turn = 0; turn < 50; turn++) {
  for (const [i, lock] of locks.entries()) {
    const into = measured[i]!;
    for (let n = 0; n < 300; n++) {
      const sentBefore = commands;
      const t0 = performance.now();
      const held = await lock.acquire(nextKey(), { ttlMs: 10_000 });
      const t1 = performance.now();
      if (turn >= 5) record(into.acquire, t0, t1);
      await held.release();
      const t2 = performance.now();
      if (turn >= 5) {
        record(into.release, t1, t2);
        into.commands += commands - sentBefore;
        into.cycles += 1;
      }
    }
  }
}

const us = (values: number[]) => (median(values) * 1000).toFixed(1).padStart(6);
const line = (p: Phases) => `${us(p.before)} ${us(p.roundTrip)} ${us(p.after)}`;
process.stdout.write(
  `${''.padEnd(28)}  acquire: before  trip  after   release: before  trip  after   commands/cycle\n`,
);
for (const [i, id] of ids.entries()) {
  const m = measured[i]!;
  process.stdout.write(
    `${id.padEnd(28)}          ${line(m.acquire)}            ${line(m.release)}   ${(m.commands / m.cycles).toFixed(2)}\n`,
  );
}
for (const lock of locks) await lock.close();

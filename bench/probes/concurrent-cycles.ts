/**
 * B's load in a process of its own, outside the harness: 64 concurrent loops,
 * each acquiring and releasing its own key, for one contender. After a
 * 1.5 s warm-up, five 600 ms windows; prints the median window's cycles/s
 * and the process's CPU µs per cycle in it. Run it once per contender and
 * alternate them: a probe for telling a process's modes apart, not a
 * benchmark (`npm run bench` takes turns within each repetition).
 *
 *   node --import @swc-node/register/esm-register bench/probes/concurrent-cycles.ts ours-service-fenced
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:b:*`.
 */
import { openContender } from '../contenders/index.js';
import { concurrentLoops, probeArguments } from './cycles.js';

const loops = 64;
const { url, ids } = probeArguments('concurrent-cycles.ts');
const id = ids[0]!;
const lock = await openContender(id, { urls: [url] });

async function window(ms: number): Promise<{ rate: number; cpuUs: number }> {
  const tally = { cycles: 0 };
  const startedAt = performance.now();
  const until = startedAt + ms;
  const cpu = process.cpuUsage();
  await concurrentLoops(
    lock,
    `probe:b:${id}`,
    loops,
    () => performance.now() < until,
    tally,
  );
  const used = process.cpuUsage(cpu);
  return {
    rate: tally.cycles / ((performance.now() - startedAt) / 1000),
    cpuUs: (used.user + used.system) / tally.cycles,
  };
}

await window(1500);
const windows: { rate: number; cpuUs: number }[] = [];
for (let i = 0; i < 5; i++) windows.push(await window(600));
windows.sort((a, b) => a.rate - b.rate);
const median = windows[2]!;
process.stdout.write(
  `${id.padEnd(24)} ${median.rate.toFixed(0).padStart(6)} cycles/s  ${median.cpuUs.toFixed(1).padStart(6)} µs CPU/cycle\n`,
);
await lock.close();

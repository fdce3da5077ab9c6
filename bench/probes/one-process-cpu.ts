/**
 * What one acquisition costs the Node process in C's one-process shape: 16
 * loops on one key in this process, hold 0, 20,000 acquisitions a round, 2
 * rounds of warm-up and 8 measured. Prints each contender's median Node CPU
 * (user + system) per acquisition and its acquisitions/s. CPU per
 * acquisition does not move with the VM's pace as acquisitions/s do, so it
 * shows what a contender adds where one process does every caller's work.
 * Each contender runs in a child process of its own (the unscoped decorator
 * patches `LockHandle` for its whole process), the contenders in turn, the
 * order reversed on a second pass.
 *
 *   node --import @swc-node/register/esm-register bench/probes/one-process-cpu.ts \
 *     ours-service ours-decorator ours-decorator-unscoped
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:cpu:*`.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openContender } from '../contenders/index.js';
import { median } from '../stats.js';
import { probeArguments } from './cycles.js';

const loops = 16;
const perRound = 20_000;
const warmupRounds = 2;
const rounds = 10;

/** Runs `id`'s rounds here and prints `<cpu µs per acquisition> <acquisitions/s>`. */
async function measure(id: string, url: string): Promise<void> {
  const lock = await openContender(id, { urls: [url] });
  const cpu: number[] = [];
  const rates: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      const key = `probe:cpu:${id}:${process.pid}:${round}`;
      let left = perRound;
      const cpuBefore = process.cpuUsage();
      const startedAt = performance.now();
      await Promise.all(
        Array.from({ length: loops }, async () => {
          while (left-- > 0) {
            const held = await lock.acquire(key, { ttlMs: 10_000 });
            await held.release();
          }
        }),
      );
      const used = process.cpuUsage(cpuBefore);
      if (round < warmupRounds) continue;
      cpu.push((used.user + used.system) / perRound);
      rates.push(perRound / ((performance.now() - startedAt) / 1000));
    }
  } finally {
    await lock.close();
  }
  process.stdout.write(`${median(cpu)} ${median(rates)}\n`);
}

const child = process.env.PROBE_CHILD;
if (child) {
  await measure(child, process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
} else {
  const { ids } = probeArguments('one-process-cpu.ts');
  const figures = new Map<string, { cpu: number[]; rates: number[] }>(
    ids.map((id) => [id, { cpu: [], rates: [] }]),
  );
  for (const order of [ids, ids.toReversed()]) {
    for (const id of order) {
      const answer = execFileSync(
        process.execPath,
        [...process.execArgv, fileURLToPath(import.meta.url)],
        { env: { ...process.env, PROBE_CHILD: id }, encoding: 'utf8' },
      );
      // The last line: a contender's module may log before it.
      const [cpu, rate] = answer
        .trim()
        .split('\n')
        .at(-1)!
        .split(' ')
        .map(Number);
      figures.get(id)!.cpu.push(cpu!);
      figures.get(id)!.rates.push(rate!);
    }
  }
  for (const [id, { cpu, rates }] of figures) {
    process.stdout.write(
      `${id}: ${cpu.map((c) => c.toFixed(1)).join(' / ')} µs of Node CPU per acquisition (two passes), ` +
        `${rates.map((r) => Math.round(r)).join(' / ')} acquisitions/s\n`,
    );
  }
}

/**
 * C's one-process shape, outside the harness: 16 loops in one worker process
 * (C's compiled bench workers) on one key, holding HOLD_MS (default 0), in
 * 2 s windows, each contender in a worker of its own and the contenders
 * taking windows in turn (the order reversed every other round). Prints each
 * contender's median acquisitions/s over the windows after the first two,
 * with the spread (coefficient of variation, smallest, largest), to compare
 * contenders where one Node process does all the callers' work.
 *
 *   node --import @swc-node/register/esm-register bench/probes/one-process-windows.ts raw-fifo ours-service ours-decorator ours-decorator-unscoped
 *
 * WINDOWS (default 12) windows per contender; extra Node flags for the
 * workers: WORKER_FLAGS. Redis at REDIS_URL (default
 * redis://127.0.0.1:6379); keys `probe:one:*`.
 */
import { median } from '../stats.js';
import { probeArguments } from './cycles.js';
import { probeWindow, windowsInTurn } from './windows.js';

const { url, ids } = probeArguments('one-process-windows.ts');
const holdMs = Number(process.env.HOLD_MS ?? 0);
const windows = Number(process.env.WINDOWS ?? 12);
const nodeFlags = (process.env.WORKER_FLAGS ?? '').split(' ').filter(Boolean);
const rates = new Map<string, number[]>(ids.map((id) => [id, []]));

await windowsInTurn(
  ids,
  { processes: 1, nodeFlags },
  windows,
  async (pool, id, n) => {
    const figures = await probeWindow(pool, id, url, {
      key: `probe:one:${id}:${n}`,
      processes: 1,
      perProcess: 16,
      holdMs,
    });
    rates.get(id)!.push(figures.acquisitionsPerSec);
  },
);
for (const [id, all] of rates) {
  const kept = all.slice(2);
  const mean = kept.reduce((a, b) => a + b, 0) / kept.length;
  const sd = Math.sqrt(
    kept.reduce((a, b) => a + (b - mean) ** 2, 0) / kept.length,
  );
  process.stdout.write(
    `${id}: median ${Math.round(median(kept))} acquisitions/s over ${kept.length} windows (cv ${(sd / mean).toFixed(2)}, ${Math.round(Math.min(...kept))}-${Math.round(Math.max(...kept))})\n`,
  );
}

/**
 * C's 4 x 4 shape, outside the harness: 16 loops over 4 worker processes
 * (C's compiled bench workers) on one key, holding HOLD_MS (default 0), in
 * 2 s windows, each worker opening a fresh instance per window as C's do. Prints each window's
 * acquisitions/s and longest wait. After window IDLE_AFTER (default 3) every
 * process sits idle for IDLE_S seconds (default 0: no pause), to show how a
 * fresh and an idle process run their first windows. Extra Node flags for the
 * workers: WORKER_FLAGS.
 *
 *   node --import @swc-node/register/esm-register bench/probes/idle-windows.ts ours-service
 *   IDLE_S=90 WORKER_FLAGS=--no-memory-reducer node --import @swc-node/register/esm-register bench/probes/idle-windows.ts raw-fifo
 *
 * Only this driver runs through the TypeScript loader; the workers, which
 * do the measured work, run compiled. Redis at REDIS_URL (default
 * redis://127.0.0.1:6379); keys `probe:idle:*`.
 */
import { sleep } from '../clock.js';
import { WorkerPool } from '../workers/pool.js';
import { probeArguments } from './cycles.js';
import { probeWindow } from './windows.js';

const processes = 4;
const perProcess = 4;
const windows = 7;

const { url, ids } = probeArguments('idle-windows.ts');
const id = ids[0]!;
const idleAfter = Number(process.env.IDLE_AFTER ?? 3);
const idleS = Number(process.env.IDLE_S ?? 0);
const holdMs = Number(process.env.HOLD_MS ?? 0);
const pool = new WorkerPool(
  processes,
  (process.env.WORKER_FLAGS ?? '').split(' ').filter(Boolean),
);
try {
  await pool.ready();
  for (let n = 0; n < windows; n++) {
    if (n === idleAfter && idleS > 0) {
      process.stdout.write(`idle ${idleS} s\n`);
      await sleep(idleS * 1000);
    }
    const f = await probeWindow(pool, id, url, {
      key: `probe:idle:${id}:${n}`,
      processes,
      perProcess,
      holdMs,
    });
    process.stdout.write(
      `window ${n + 1}: ${Math.round(f.acquisitionsPerSec)} acquisitions/s, longest wait ${f.longestWaitMs.toFixed(1)} ms\n`,
    );
  }
} finally {
  await pool.stop();
}

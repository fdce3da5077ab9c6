/**
 * C's 4 x 4 shape, hold 0, outside the harness: 16 loops over 4 worker
 * processes on one key, in 2 s windows, each worker opening a fresh instance
 * per window as C's do. Prints each window's acquisitions/s and longest wait.
 * After window IDLE_AFTER (default 3) every process sits idle for IDLE_S
 * seconds (default 0: no pause), to show how a fresh and an idle process
 * run their first windows. Extra Node flags for the workers: WORKER_FLAGS.
 *
 *   node --import @swc-node/register/esm-register bench/probes/idle-windows.ts ours-service
 *   IDLE_S=90 node --import @swc-node/register/esm-register bench/probes/idle-windows.ts raw-fifo
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:idle:*`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nowMs, sleep } from '../clock.js';
import { openContender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { analyzeContention } from '../scenarios/contention-analysis.js';
import {
  runContention,
  type ContentionEvents,
} from '../scenarios/contention-core.js';
import { probeArguments } from './cycles.js';

const processes = 4;
const perProcess = 4;
const windowMs = 2_000;
const windows = 7;

interface WindowOrder {
  readonly key: string;
  readonly startAt: number;
}

if (process.env.IDLE_WINDOWS_WORKER !== undefined) {
  await serveWindows(Number(process.env.IDLE_WINDOWS_WORKER));
} else {
  await driveWorkers();
}

/** A worker: opens the contender on 'open', runs its loops of a window on each order. */
async function serveWindows(index: number): Promise<void> {
  const { url, ids } = probeArguments('idle-windows.ts');
  let lock: ContenderInstance | undefined;
  process.on('message', (order: WindowOrder | 'open') => {
    void (async () => {
      if (order === 'open') {
        lock = await openContender(ids[0]!, { urls: [url] });
        process.send?.('opened');
        return;
      }
      const events = await runContention(lock!, {
        key: order.key,
        who: Array.from(
          { length: perProcess },
          (_, i) => index * perProcess + i,
        ),
        holdMs: 0,
        startAt: order.startAt,
        windowMs,
        ttlMs: 10_000,
        drainMs: 5_000,
      });
      await lock!.close();
      process.send?.(events);
    })();
  });
  process.send?.('ready');
  await new Promise(() => undefined);
}

function reply<T>(worker: ChildProcess, message: unknown): Promise<T> {
  return new Promise((resolve) => {
    worker.once('message', resolve);
    if (message !== undefined) worker.send(message as object);
  });
}

async function driveWorkers(): Promise<void> {
  const { ids } = probeArguments('idle-windows.ts');
  const idleAfter = Number(process.env.IDLE_AFTER ?? 3);
  const idleS = Number(process.env.IDLE_S ?? 0);
  const workers = Array.from({ length: processes }, (_, index) =>
    fork(fileURLToPath(import.meta.url), ids, {
      env: { ...process.env, IDLE_WINDOWS_WORKER: String(index) },
      execArgv: [
        ...process.execArgv,
        ...(process.env.WORKER_FLAGS ?? '').split(' ').filter(Boolean),
      ],
    }),
  );
  await Promise.all(workers.map((w) => reply(w, undefined)));
  for (let n = 0; n < windows; n++) {
    if (n === idleAfter && idleS > 0) {
      process.stdout.write(`idle ${idleS} s\n`);
      await sleep(idleS * 1000);
    }
    await Promise.all(workers.map((w) => reply(w, 'open')));
    const startAt = nowMs() + 100;
    const key = `probe:idle:${ids[0]}:${n}`;
    const parts = await Promise.all(
      workers.map((w) => reply<ContentionEvents>(w, { key, startAt })),
    );
    const f = analyzeContention(
      parts,
      processes * perProcess,
      startAt,
      windowMs,
    );
    process.stdout.write(
      `window ${n + 1}: ${Math.round(f.acquisitionsPerSec)} acquisitions/s, longest wait ${f.longestWaitMs.toFixed(1)} ms\n`,
    );
  }
  for (const w of workers) w.kill();
}

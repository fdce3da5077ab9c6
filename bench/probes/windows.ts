import { nowMs } from '../clock.js';
import {
  analyzeContention,
  type ContentionFigures,
} from '../scenarios/contention-analysis.js';
import type { ContentionSpec } from '../scenarios/contention-core.js';
import type { WorkerPool } from '../workers/pool.js';

const probeWindowMs = 2_000;

/**
 * One window of C's shape for the probes: `perProcess` loops in each of the
 * pool's `processes` worker processes on `key`, holding `holdMs`, the
 * contender opened fresh for the window (as C's windows do) and closed after.
 */
export async function probeWindow(
  pool: WorkerPool,
  id: string,
  url: string,
  shape: {
    readonly key: string;
    readonly processes: number;
    readonly perProcess: number;
    readonly holdMs: number;
  },
): Promise<ContentionFigures> {
  const { key, processes, perProcess, holdMs } = shape;
  await pool.open(id, [url], processes);
  try {
    const startAt = nowMs() + 100;
    const specs = Array.from(
      { length: processes },
      (_spec, w): ContentionSpec => ({
        key,
        who: Array.from({ length: perProcess }, (_, i) => w * perProcess + i),
        holdMs,
        startAt,
        windowMs: probeWindowMs,
        ttlMs: 10_000,
        drainMs: 5_000,
      }),
    );
    const parts = await pool.run(specs);
    return analyzeContention(
      parts,
      processes * perProcess,
      startAt,
      probeWindowMs,
    );
  } finally {
    await pool.close();
  }
}

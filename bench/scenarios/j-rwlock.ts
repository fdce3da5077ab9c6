import { nowMs } from '../clock.js';
import { contender, readWriteLockIds } from '../contenders/index.js';
import {
  max,
  median,
  medianInterval,
  perRepetitionRatios,
  type RatioInterval,
} from '../stats.js';
import { WorkerPool } from '../workers/pool.js';
import type { ContentionSpec } from './contention-core.js';
import { RepeatedWindows } from './repeated-windows.js';
import {
  errorText,
  rotation,
  withTimeout,
  type BenchContext,
} from './context.js';
import { analyzeReadWrite, type ReadWriteFigures } from './rwlock-analysis.js';

export interface ReadWriteRow {
  readonly id: string;
  readonly label: string;
  readonly windows: ReadWriteFigures[];
  readonly error?: string;
  /** Medians over the repetitions (worst where named so). */
  readonly acquisitionsPerSec: number;
  /** reads and writes/s over the raw read-write lock's, per repetition: median and interval. */
  readonly ratio: RatioInterval;
  readonly readsPerSec: number;
  readonly writesPerSec: number;
  readonly readWaitP50: number;
  readonly readWaitP99: number;
  readonly writeWaitP50: number;
  readonly writeWaitP99: number;
  readonly longestWaitMs: number;
  readonly worstLongestWaitMs: number;
  readonly fairness: number;
  readonly worstFairness: number;
  readonly starved: number;
  readonly worstStarved: number;
  /** Most readers holding at once over every window. */
  readonly maxReaders: number;
  /** Acquisitions beside a hold they exclude, over every window (must be 0). */
  readonly overlaps: number;
  readonly failures: number;
}

export interface ReadWriteVariantResult {
  readonly holdMs: number;
  readonly label: string;
  readonly rows: ReadWriteRow[];
}

export interface ReadWriteResult {
  readonly callers: number;
  readonly processes: number;
  readonly readShare: number;
  readonly reps: number;
  readonly windowMs: number;
  readonly variants: ReadWriteVariantResult[];
}

function variantLabel(ctx: BenchContext, holdMs: number): string {
  const { callers, processes, readShare } = ctx.config.rwlock;
  return `${processes} processes x ${callers / processes} callers, ${Math.round(readShare * 100)}% reads, hold ${holdMs} ms`;
}

export function plannedReadWrite(ctx: BenchContext, count: number): number {
  const { reps, holds } = ctx.config.rwlock;
  return reps * holds.length * count;
}

/** The callers' numbers of each of `processes` workers. */
function callersOf(callers: number, processes: number): number[][] {
  const per = callers / processes;
  return Array.from({ length: processes }, (_, w) =>
    Array.from({ length: per }, (_slot, i) => w * per + i),
  );
}

/**
 * J: `callers` loops spread over `processes` worker processes each take the
 * read lock of one read-write lock (with probability `readShare`) or its
 * write lock, hold it `holdMs` (0: release at once), release it, and start
 * again, for a window; as I, every loop starts at the same moment of the
 * shared clock, each contender has worker processes of its own (warmed up
 * first, unmeasured), and the ratios are per repetition to the raw
 * read-write lock's window of the same repetition. Every loop draws its
 * reads and writes from a seed of the repetition, so each contender of a
 * repetition gets the same mix.
 */
export async function runReadWriteScenario(
  ctx: BenchContext,
  ids: readonly string[] = readWriteLockIds,
): Promise<ReadWriteResult> {
  const { reps, windowMs, callers, processes, readShare, holds, drainMs } =
    ctx.config.rwlock;
  const { ttlMs, jitWarmupMs } = ctx.config;
  const who = callersOf(callers, processes);
  const pools = new Map(ids.map((id) => [id, new WorkerPool(processes)]));
  const windows = new RepeatedWindows<ReadWriteFigures>();

  /** One window of `id` on its pool; the events of every process, analysed. */
  const window = async (
    id: string,
    key: string,
    holdMs: number,
    ms: number,
    seed: number,
  ): Promise<ReadWriteFigures> => {
    const pool = pools.get(id)!;
    await pool.open(id, [ctx.server.url]);
    try {
      // Far enough ahead for every worker to get its spec.
      const startAt = nowMs() + 100;
      const specs = who.map((mine): ContentionSpec => ({
        key,
        who: mine,
        holdMs,
        startAt,
        windowMs: ms,
        ttlMs,
        drainMs,
        readShare,
        seed,
      }));
      const parts = await withTimeout(
        pool.run(specs),
        ms + drainMs + 30_000,
        `${id}'s window`,
      );
      return analyzeReadWrite(parts, callers, startAt, ms);
    } finally {
      await pool.close();
    }
  };

  try {
    await withTimeout(
      Promise.all([...pools.values()].map((pool) => pool.ready())),
      180_000,
      'starting the read-write lock workers',
    );
    if (jitWarmupMs > 0) {
      for (const id of ids) {
        ctx.progress.show(`J: warming up ${id}`);
        try {
          await window(id, `bench:J:warm-up:${id}`, 0, jitWarmupMs, 0);
        } catch (error) {
          ctx.progress.log(`J: warming up ${id} failed: ${errorText(error)}`);
        } finally {
          await ctx.admin.flushall();
        }
      }
    }
    for (let rep = 0; rep < reps; rep++) {
      for (const [v, holdMs] of holds.entries()) {
        for (const id of rotation(ids, rep)) {
          const label = variantLabel(ctx, holdMs);
          ctx.progress.step(`J: ${label}: ${id} (rep ${rep + 1}/${reps})`);
          if (windows.failed(v, id)) continue;
          await windows.run(
            v,
            id,
            rep,
            () =>
              window(
                id,
                `bench:J:${v}:${id}:${rep}`,
                holdMs,
                windowMs,
                rep + 1,
              ),
            (text) => ctx.progress.log(`J: ${label}: ${id} failed: ${text}`),
          );
          await ctx.admin.flushall();
        }
      }
    }
  } finally {
    await Promise.all([...pools.values()].map((pool) => pool.stop()));
  }

  const rate = (v: number, id: string) => windows.rates(v, id);
  return {
    callers,
    processes,
    readShare,
    reps,
    windowMs,
    variants: holds.map((holdMs, v) => ({
      holdMs,
      label: variantLabel(ctx, holdMs),
      rows: ids.map((id): ReadWriteRow => {
        const w = windows.figures(v, id);
        const m = (pick: (f: ReadWriteFigures) => number) =>
          median(w.map(pick));
        const sum = (pick: (f: ReadWriteFigures) => number) =>
          w.reduce((total, f) => total + pick(f), 0);
        const overlaps = sum((f) => f.overlaps);
        const failed = windows.error(v, id);
        const overlapping =
          overlaps > 0
            ? `${overlaps} acquisition(s) began beside a hold they exclude (a writer beside anyone, a reader beside a writer)`
            : undefined;
        return {
          id,
          label: contender(id).label,
          windows: w,
          error: failed ?? overlapping,
          acquisitionsPerSec: m((f) => f.acquisitionsPerSec),
          ratio: medianInterval(
            perRepetitionRatios(rate(v, id), rate(v, 'raw-rwlock')),
          ),
          readsPerSec: m((f) => f.readsPerSec),
          writesPerSec: m((f) => f.writesPerSec),
          readWaitP50: m((f) => f.readWaitP50),
          readWaitP99: m((f) => f.readWaitP99),
          writeWaitP50: m((f) => f.writeWaitP50),
          writeWaitP99: m((f) => f.writeWaitP99),
          longestWaitMs: m((f) => f.longestWaitMs),
          worstLongestWaitMs: max(w.map((f) => f.longestWaitMs)),
          fairness: m((f) => f.fairness),
          worstFairness: max(w.map((f) => f.fairness)),
          starved: m((f) => f.starved),
          worstStarved: max(w.map((f) => f.starved)),
          maxReaders: max(w.map((f) => f.maxReaders)),
          overlaps,
          failures: sum((f) => f.failures),
        };
      }),
    })),
  };
}

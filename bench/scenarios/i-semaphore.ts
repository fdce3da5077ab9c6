import { nowMs } from '../clock.js';
import { contender, semaphoreIds } from '../contenders/index.js';
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
import {
  analyzeSemaphore,
  type SemaphoreFigures,
} from './semaphore-analysis.js';

export interface SemaphoreRow {
  readonly id: string;
  readonly label: string;
  readonly windows: SemaphoreFigures[];
  readonly error?: string;
  /** Medians over the repetitions (worst where named so). */
  readonly acquisitionsPerSec: number;
  /** acquisitions/s over the raw ZSET semaphore's, per repetition: median and interval. */
  readonly ratio: RatioInterval;
  readonly waitP50: number;
  readonly waitP99: number;
  readonly longestWaitMs: number;
  readonly worstLongestWaitMs: number;
  readonly fairness: number;
  readonly worstFairness: number;
  readonly starved: number;
  readonly worstStarved: number;
  /** Most holders at once over every window (must be <= the limit). */
  readonly maxHolders: number;
  /** Acquisitions that made more than the limit hold at once, over every window (must be 0). */
  readonly overbooked: number;
  readonly failures: number;
}

export interface SemaphoreVariantResult {
  readonly holdMs: number;
  readonly label: string;
  readonly rows: SemaphoreRow[];
}

export interface SemaphoreResult {
  readonly callers: number;
  readonly limit: number;
  readonly processes: number;
  readonly reps: number;
  readonly windowMs: number;
  readonly variants: SemaphoreVariantResult[];
}

function variantLabel(ctx: BenchContext, holdMs: number): string {
  const { callers, limit, processes } = ctx.config.semaphore;
  return `${processes} processes x ${callers / processes} callers, ${limit} permits, hold ${holdMs} ms`;
}

export function plannedSemaphore(ctx: BenchContext, count: number): number {
  const { reps, holds } = ctx.config.semaphore;
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
 * I: `callers` loops spread over `processes` worker processes each take one
 * permit of a `limit`-permit semaphore, hold it `holdMs` (0: release at
 * once), release it, and start again, for a window; as C, every loop starts
 * at the same moment of the shared clock, each contender has worker
 * processes of its own (warmed up first, unmeasured), and the ratios are per
 * repetition to the raw ZSET semaphore's window of the same repetition.
 */
export async function runSemaphoreScenario(
  ctx: BenchContext,
  ids: readonly string[] = semaphoreIds,
): Promise<SemaphoreResult> {
  const { reps, windowMs, callers, processes, limit, holds, drainMs } =
    ctx.config.semaphore;
  const { ttlMs, jitWarmupMs } = ctx.config;
  const who = callersOf(callers, processes);
  const pools = new Map(ids.map((id) => [id, new WorkerPool(processes)]));
  const windows = new RepeatedWindows<SemaphoreFigures>();

  /** One window of `id` on its pool; the events of every process, analysed. */
  const window = async (
    id: string,
    key: string,
    holdMs: number,
    ms: number,
  ): Promise<SemaphoreFigures> => {
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
        limit,
      }));
      const parts = await withTimeout(
        pool.run(specs),
        ms + drainMs + 30_000,
        `${id}'s window`,
      );
      return analyzeSemaphore(parts, callers, limit, startAt, ms);
    } finally {
      await pool.close();
    }
  };

  try {
    await withTimeout(
      Promise.all([...pools.values()].map((pool) => pool.ready())),
      180_000,
      'starting the semaphore workers',
    );
    if (jitWarmupMs > 0) {
      for (const id of ids) {
        ctx.progress.show(`I: warming up ${id}`);
        try {
          await window(id, `bench:I:warm-up:${id}`, 0, jitWarmupMs);
        } catch (error) {
          ctx.progress.log(`I: warming up ${id} failed: ${errorText(error)}`);
        } finally {
          await ctx.admin.flushall();
        }
      }
    }
    for (let rep = 0; rep < reps; rep++) {
      for (const [v, holdMs] of holds.entries()) {
        for (const id of rotation(ids, rep)) {
          const label = variantLabel(ctx, holdMs);
          ctx.progress.step(`I: ${label}: ${id} (rep ${rep + 1}/${reps})`);
          if (windows.failed(v, id)) continue;
          await windows.run(
            v,
            id,
            rep,
            () => window(id, `bench:I:${v}:${id}:${rep}`, holdMs, windowMs),
            (text) => ctx.progress.log(`I: ${label}: ${id} failed: ${text}`),
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
    limit,
    processes,
    reps,
    windowMs,
    variants: holds.map((holdMs, v) => ({
      holdMs,
      label: variantLabel(ctx, holdMs),
      rows: ids.map((id): SemaphoreRow => {
        const w = windows.figures(v, id);
        const m = (pick: (f: SemaphoreFigures) => number) =>
          median(w.map(pick));
        const sum = (pick: (f: SemaphoreFigures) => number) =>
          w.reduce((total, f) => total + pick(f), 0);
        const overbooked = sum((f) => f.overbooked);
        const failed = windows.error(v, id);
        const overbooking =
          overbooked > 0
            ? `${overbooked} acquisition(s) made more than ${limit} holders at once (at most ${max(w.map((f) => f.maxHolders))})`
            : undefined;
        return {
          id,
          label: contender(id).label,
          windows: w,
          error: failed ?? overbooking,
          acquisitionsPerSec: m((f) => f.acquisitionsPerSec),
          ratio: medianInterval(
            perRepetitionRatios(rate(v, id), rate(v, 'raw-semaphore')),
          ),
          waitP50: m((f) => f.waitP50),
          waitP99: m((f) => f.waitP99),
          longestWaitMs: m((f) => f.longestWaitMs),
          worstLongestWaitMs: max(w.map((f) => f.longestWaitMs)),
          fairness: m((f) => f.fairness),
          worstFairness: max(w.map((f) => f.fairness)),
          starved: m((f) => f.starved),
          worstStarved: max(w.map((f) => f.starved)),
          maxHolders: max(w.map((f) => f.maxHolders)),
          overbooked,
          failures: sum((f) => f.failures),
        };
      }),
    })),
  };
}

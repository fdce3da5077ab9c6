import { nowMs } from '../clock.js';
import { contender, contentionIds } from '../contenders/index.js';
import {
  max,
  median,
  medianInterval,
  perRepetitionRatios,
  type RatioInterval,
} from '../stats.js';
import { WorkerPool } from '../workers/pool.js';
import type { ContentionEvents, ContentionSpec } from './contention-core.js';
import { RepeatedWindows } from './repeated-windows.js';
import {
  analyzeContention,
  type ContentionFigures,
} from './contention-analysis.js';
import {
  errorText,
  rotation,
  withTimeout,
  type BenchContext,
} from './context.js';

export interface ContentionVariant {
  readonly processes: number;
  readonly holdMs: number;
  readonly label: string;
}

export interface ContentionRow {
  readonly id: string;
  readonly label: string;
  readonly windows: ContentionFigures[];
  readonly error?: string;
  /** Unmeasured windows run before the first measured one (absent in runs from before). */
  readonly warmupWindows?: number;
  /** Medians over the repetitions (worst where named so). */
  readonly acquisitionsPerSec: number;
  /** acquisitions/s over the polling raw lock's: the median of the per-repetition ratios. */
  readonly ratio: number;
  /** acquisitions/s over the raw FIFO hand-off's, per repetition: median and interval (absent in runs from before it). */
  readonly ratioToFifo?: RatioInterval;
  readonly handoffP50: number;
  readonly handoffP99: number;
  readonly longestWaitMs: number;
  readonly worstLongestWaitMs: number;
  readonly fairness: number;
  /** Fairness of the least fair window (absent in runs from before). */
  readonly worstFairness?: number;
  readonly starved: number;
  readonly worstStarved: number;
  readonly selfHandoffShare: number;
  readonly overlaps: number;
  readonly failures: number;
}

export interface ContentionVariantResult extends ContentionVariant {
  readonly rows: ContentionRow[];
}

export interface ContentionResult {
  readonly contenders: number;
  readonly reps: number;
  /** Repetitions of ours and the yardstick (absent in runs from before: `reps`). */
  readonly targetedReps?: number;
  readonly windowMs: number;
  /** Each library ran in worker processes of its own (absent in runs from before). */
  readonly ownProcesses?: boolean;
  /** Each contender ran in worker processes of its own (absent in runs from before). */
  readonly processesPerContender?: boolean;
  /** Unmeasured windows per variant before the first measured one (absent in runs from before: one 2 s window at hold 0). */
  readonly warmup?: {
    readonly rounds: number;
    readonly windowMs: number;
    /** Rounds instead where some of a contender's processes ran for the first time (absent in runs from before: `rounds`). */
    readonly freshRounds?: number;
    /** Then more until each process had made this many acquisitions in the variant (absent in runs from before: none)... */
    readonly acquisitions?: number;
    /** ...up to this many windows in all. */
    readonly maxRounds?: number;
  };
  readonly variants: ContentionVariantResult[];
}

export function contentionVariants(ctx: BenchContext): ContentionVariant[] {
  const { holds, processes, contenders } = ctx.config.contention;
  const variants: ContentionVariant[] = [];
  for (const procs of [1, processes]) {
    for (const holdMs of holds) {
      variants.push({
        processes: procs,
        holdMs,
        label:
          procs === 1
            ? `1 process x ${contenders}, hold ${holdMs} ms`
            : `${procs} processes x ${contenders / procs}, hold ${holdMs} ms`,
      });
    }
  }
  return variants;
}

/** The raw FIFO lock with direct hand-off that C's targets compare with. */
const yardstick = 'raw-fifo';

/** Ours, whose rows the targets judge, and the yardstick they are judged against. */
function targeted(id: string): boolean {
  return id === yardstick || contender(id).kind === 'ours';
}

export function plannedContention(
  ctx: BenchContext,
  ids: readonly string[],
): number {
  const { reps, targetedReps } = ctx.config.contention;
  const extra = Math.max(0, targetedReps - reps);
  return (
    contentionVariants(ctx).length *
    (reps * ids.length + extra * ids.filter(targeted).length)
  );
}

/**
 * Unmeasured windows of `jitWarmupMs` in `variant`, run just before `id`'s
 * first measured window in it: V8 then has optimised the contender's code in
 * each of its processes for that shape, and no process has sat idle since.
 * At least `warmupRounds` of them (`freshWarmupRounds` when some of the
 * processes the variant uses have not run before), then more until each
 * process has made `warmupAcquisitions`, up to `maxWarmupRounds` in all (see
 * config.ts). Returns how many ran.
 */
async function warmUp(
  ctx: BenchContext,
  pool: WorkerPool,
  id: string,
  variant: ContentionVariant,
  v: number,
  fresh: boolean,
): Promise<number> {
  const { jitWarmupMs } = ctx.config;
  if (jitWarmupMs <= 0) return 0;
  const {
    warmupRounds,
    freshWarmupRounds,
    warmupAcquisitions,
    maxWarmupRounds,
  } = ctx.config.contention;
  const least = fresh ? freshWarmupRounds : warmupRounds;
  const made = Array.from({ length: variant.processes }, () => 0);
  let round = 0;
  while (
    round < least ||
    (round < maxWarmupRounds && Math.min(...made) < warmupAcquisitions)
  ) {
    try {
      const { parts } = await runWindow(
        ctx,
        pool,
        id,
        variant,
        `bench:C:warm-up:${id}:${round}:${v}`,
        jitWarmupMs,
      );
      parts.forEach((part, w) => (made[w] += part.acquisitions.length / 4));
    } catch (error) {
      ctx.progress.log(
        `C: ${variant.label}: warming up ${id} failed: ${errorText(error)}`,
      );
    } finally {
      await ctx.admin.flushall();
    }
    round++;
  }
  return round;
}

/** One window of `variant` on `id`'s pool: each loop's events, per process. */
async function runWindow(
  ctx: BenchContext,
  pool: WorkerPool,
  id: string,
  variant: ContentionVariant,
  key: string,
  windowMs: number,
): Promise<{ parts: ContentionEvents[]; startAt: number }> {
  const { contenders, drainMs } = ctx.config.contention;
  const per = contenders / variant.processes;
  await pool.open(id, [ctx.server.url], variant.processes);
  try {
    // Far enough ahead for every worker to get its spec.
    const startAt = nowMs() + 100;
    const specs = Array.from(
      { length: variant.processes },
      (_, w): ContentionSpec => ({
        key,
        who: Array.from({ length: per }, (_slot, i) => w * per + i),
        holdMs: variant.holdMs,
        startAt,
        windowMs,
        ttlMs: ctx.config.ttlMs,
        drainMs,
      }),
    );
    const parts = await withTimeout(
      pool.run(specs),
      windowMs + drainMs + 30_000,
      `a window of ${id}`,
    );
    return { parts, startAt };
  } finally {
    await pool.close();
  }
}

/**
 * C: one key, 16 contenders, in one process and spread over worker processes,
 * with a zero and a 1 ms hold. Each window starts every loop at the same
 * moment of the shared clock. Ratios are per repetition, to the raw FIFO
 * hand-off (the yardstick) and to the polling raw lock, each of whose windows
 * ran in the same repetition.
 */
export async function runContentionScenario(
  ctx: BenchContext,
  ids: readonly string[] = contentionIds,
): Promise<ContentionResult> {
  const { reps, targetedReps, windowMs, contenders, processes } =
    ctx.config.contention;
  const allReps = Math.max(reps, targetedReps);
  const variants = contentionVariants(ctx);
  // Variants in which some of each contender's processes run for the first
  // time: every contender meets the variants in the same order.
  const fresh = variants.map(
    (variant, v) =>
      variant.processes >
      Math.max(0, ...variants.slice(0, v).map((x) => x.processes)),
  );
  // Every contender has worker processes of its own (see bench-worker.ts),
  // all started before the first window; the one-process variants run in
  // the first of them.
  const pools = new Map(ids.map((id) => [id, new WorkerPool(processes)]));
  const windows = new RepeatedWindows<ContentionFigures>();
  const warmupWindows = new Map<string, number>();
  try {
    await withTimeout(
      Promise.all([...pools.values()].map((pool) => pool.ready())),
      180_000,
      'starting the contention workers',
    );
    for (let rep = 0; rep < allReps; rep++) {
      const repIds = rep < reps ? ids : ids.filter(targeted);
      for (const [v, variant] of variants.entries()) {
        for (const id of rotation(repIds, rep)) {
          ctx.progress.step(
            `C: ${variant.label}: ${id} (rep ${rep + 1}/${targeted(id) ? allReps : reps})`,
          );
          if (windows.failed(v, id)) continue;
          const pool = pools.get(id)!;
          if (rep === 0)
            warmupWindows.set(
              `${v}:${id}`,
              await warmUp(ctx, pool, id, variant, v, fresh[v]),
            );
          await windows.run(
            v,
            id,
            rep,
            async () => {
              const { parts, startAt } = await runWindow(
                ctx,
                pool,
                id,
                variant,
                `bench:C:${v}:${id}:${rep}`,
                windowMs,
              );
              return analyzeContention(parts, contenders, startAt, windowMs);
            },
            (text) =>
              ctx.progress.log(`C: ${variant.label}: ${id} failed: ${text}`),
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
    contenders,
    reps,
    targetedReps: allReps,
    windowMs,
    warmup: {
      rounds: ctx.config.contention.warmupRounds,
      windowMs: ctx.config.jitWarmupMs,
      freshRounds: ctx.config.contention.freshWarmupRounds,
      acquisitions: ctx.config.contention.warmupAcquisitions,
      maxRounds: ctx.config.contention.maxWarmupRounds,
    },
    ownProcesses: true,
    processesPerContender: true,
    variants: variants.map((variant, v) => ({
      ...variant,
      rows: ids.map((id): ContentionRow => {
        const w = windows.figures(v, id);
        const m = (pick: (f: ContentionFigures) => number) =>
          median(w.map(pick));
        const toRaw = perRepetitionRatios(rate(v, id), rate(v, 'raw'));
        const toFifo = perRepetitionRatios(rate(v, id), rate(v, yardstick));
        return {
          id,
          label: contender(id).label,
          windows: w,
          error: windows.error(v, id),
          warmupWindows: warmupWindows.get(`${v}:${id}`),
          acquisitionsPerSec: m((f) => f.acquisitionsPerSec),
          ratio: median(toRaw),
          ratioToFifo: ids.includes(yardstick)
            ? medianInterval(toFifo)
            : undefined,
          handoffP50: m((f) => f.handoffP50),
          handoffP99: m((f) => f.handoffP99),
          longestWaitMs: m((f) => f.longestWaitMs),
          worstLongestWaitMs: max(w.map((f) => f.longestWaitMs)),
          fairness: m((f) => f.fairness),
          worstFairness: max(w.map((f) => f.fairness)),
          starved: m((f) => f.starved),
          worstStarved: max(w.map((f) => f.starved)),
          selfHandoffShare: m((f) => f.selfHandoffShare),
          overlaps: w.reduce((sum, f) => sum + f.overlaps, 0),
          failures: w.reduce((sum, f) => sum + f.failures, 0),
        };
      }),
    })),
  };
}

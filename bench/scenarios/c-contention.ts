import { nowMs } from '../clock.js';
import { contender, contentionIds } from '../contenders/index.js';
import { max, median, pairedRatio } from '../stats.js';
import { WorkerPool } from '../workers/pool.js';
import type { ContentionEvents, ContentionSpec } from './contention-core.js';
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
  /** Medians over the repetitions (worst where named so). */
  readonly acquisitionsPerSec: number;
  readonly ratio: number;
  readonly handoffP50: number;
  readonly handoffP99: number;
  readonly longestWaitMs: number;
  readonly worstLongestWaitMs: number;
  readonly fairness: number;
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
  readonly windowMs: number;
  /** Each contender ran in worker processes of its own (absent in runs from before). */
  readonly ownProcesses?: boolean;
  readonly variants: ContentionVariantResult[];
}

const slot = (variant: number, id: string) => `${variant}|${id}`;

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

export function plannedContention(ctx: BenchContext, count: number): number {
  return ctx.config.contention.reps * contentionVariants(ctx).length * count;
}

/**
 * C: one key, 16 contenders, in one process and spread over worker processes,
 * with a zero and a 1 ms hold. Each window starts every loop at the same
 * moment of the shared clock.
 */
export async function runContentionScenario(
  ctx: BenchContext,
  ids: readonly string[] = contentionIds,
): Promise<ContentionResult> {
  const { reps, windowMs, contenders, processes, drainMs } =
    ctx.config.contention;
  const variants = contentionVariants(ctx);
  // Every library has worker processes of its own (see bench-worker.ts), all
  // started before the first window; the one-process variants run in the
  // first of them.
  const pools = new Map<string, WorkerPool>();
  for (const id of ids) {
    const library = contender(id).library;
    if (!pools.has(library)) pools.set(library, new WorkerPool(processes));
  }
  const windows = new Map<string, ContentionFigures[]>();
  const errors = new Map<string, string>();
  try {
    await withTimeout(
      Promise.all([...pools.values()].map((pool) => pool.ready())),
      180_000,
      'starting the contention workers',
    );
    for (let rep = 0; rep < reps; rep++) {
      for (const [v, variant] of variants.entries()) {
        for (const id of rotation(ids, rep)) {
          ctx.progress.step(
            `C: ${variant.label}: ${id} (rep ${rep + 1}/${reps})`,
          );
          const at = slot(v, id);
          if (errors.has(at)) continue;
          const key = `bench:C:${v}:${id}:${rep}`;
          const spec = (who: number[], startAt: number): ContentionSpec => ({
            key,
            who,
            holdMs: variant.holdMs,
            startAt,
            windowMs,
            ttlMs: ctx.config.ttlMs,
            drainMs,
          });
          const pool = pools.get(contender(id).library)!;
          try {
            const per = contenders / variant.processes;
            await pool.open(id, [ctx.server.url], variant.processes);
            let parts: ContentionEvents[];
            // Far enough ahead for every worker to get its spec.
            const startAt = nowMs() + 100;
            try {
              parts = await pool.run(
                Array.from({ length: variant.processes }, (_, w) =>
                  spec(
                    Array.from({ length: per }, (_slot, i) => w * per + i),
                    startAt,
                  ),
                ),
              );
            } finally {
              await pool.close();
            }
            const figures = analyzeContention(
              parts,
              contenders,
              startAt,
              windowMs,
            );
            if (!windows.has(at)) windows.set(at, []);
            windows.get(at)!.push(figures);
          } catch (error) {
            errors.set(at, errorText(error));
            ctx.progress.log(
              `C: ${variant.label}: ${id} failed: ${errorText(error)}`,
            );
          }
          await ctx.admin.flushall();
        }
      }
    }
  } finally {
    await Promise.all([...pools.values()].map((pool) => pool.stop()));
  }

  return {
    contenders,
    reps,
    windowMs,
    ownProcesses: true,
    variants: variants.map((variant, v) => {
      const base = (windows.get(slot(v, 'raw')) ?? []).map(
        (w) => w.acquisitionsPerSec,
      );
      return {
        ...variant,
        rows: ids.map((id): ContentionRow => {
          const w = windows.get(slot(v, id)) ?? [];
          const m = (pick: (f: ContentionFigures) => number) =>
            median(w.map(pick));
          return {
            id,
            label: contender(id).label,
            windows: w,
            error: errors.get(slot(v, id)),
            acquisitionsPerSec: m((f) => f.acquisitionsPerSec),
            ratio: pairedRatio(
              w.map((f) => f.acquisitionsPerSec),
              base,
            ),
            handoffP50: m((f) => f.handoffP50),
            handoffP99: m((f) => f.handoffP99),
            longestWaitMs: m((f) => f.longestWaitMs),
            worstLongestWaitMs: max(w.map((f) => f.longestWaitMs)),
            fairness: m((f) => f.fairness),
            starved: m((f) => f.starved),
            worstStarved: max(w.map((f) => f.starved)),
            selfHandoffShare: m((f) => f.selfHandoffShare),
            overlaps: w.reduce((sum, f) => sum + f.overlaps, 0),
            failures: w.reduce((sum, f) => sum + f.failures, 0),
          };
        }),
      };
    }),
  };
}

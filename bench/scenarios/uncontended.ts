import { createHook } from 'node:async_hooks';
import {
  contender,
  openContender,
  uncontendedIds,
} from '../contenders/index.js';
import { median, type LatencySummary } from '../stats.js';
import type { Placement, Unplaced } from '../affinity.js';
import type { NamedWorkers } from '../workers/pool.js';
import { runInTurns } from '../workers/turns.js';
import {
  errorText,
  rotation,
  workerBeside,
  type BenchContext,
} from './context.js';

/** One slice of A or B for one contender. */
export interface UncontendedSlice {
  readonly cyclesPerSec: number;
  /** A: acquisition latency; B: whole cycle latency (acquire + release). */
  readonly acquire: LatencySummary;
  readonly release: LatencySummary;
  readonly cycle: LatencySummary;
  /** CPU time (user + system) per cycle of the process that ran the slice, in µs. */
  readonly nodeCpuUsPerCycle: number;
  /** cycles/s of the raw baseline over the turns it took beside this slice. */
  readonly baselineCyclesPerSec?: number;
  /** cycles/s of the contender this one is compared with (Contender.comparedWith), in the same turns. */
  readonly referenceCyclesPerSec?: number;
}

export interface UncontendedRow {
  readonly id: string;
  readonly label: string;
  readonly detail: string;
  /** The contender it also took turns with, and is compared with. */
  readonly comparedWith?: string;
  readonly slices: UncontendedSlice[];
  readonly error?: string;
  /** Medians over the repetitions. */
  readonly cyclesPerSec: number;
  readonly acquireP50: number;
  readonly acquireP99: number;
  readonly releaseP50: number;
  readonly releaseP99: number;
  readonly cycleP50: number;
  readonly cycleP99: number;
  readonly nodeCpuUsPerCycle: number;
  /** B only: promises created per cycle (async_hooks), a count free of noise. */
  readonly promisesPerCycle?: number;
}

export interface UncontendedResult {
  readonly scenario: 'A' | 'B';
  readonly loops: number;
  readonly reps: number;
  /** Repetitions of the rows a target judges (absent in runs from before: `reps`). */
  readonly targetedReps?: number;
  readonly sliceMs: number;
  /** Length of a turn in a side-by-side slice (absent in runs from before turns). */
  readonly switchMs?: number;
  /** The turns alternated between worker processes of each contender's own (absent in runs from before). */
  readonly turnsAcrossProcesses?: boolean;
  /** A: where the Redis server and the workers ran (absent in B and in runs from before). */
  readonly placement?: Placement | Unplaced;
  readonly rows: UncontendedRow[];
}

/** A and B: the least cycles/s of each row against the raw baseline's (a target each). */
export const uncontendedMinimumToRaw: Readonly<Record<string, number>> = {
  'ours-service': 0.95,
  'ours-decorator': 0.85,
};

/** A and B: the fenced cycle, judged against the unfenced one in the same turns. */
export const fencedRowId = 'ours-service-fenced';

/**
 * The rows of A and B that a target judges: ours against the raw baseline,
 * and the fenced cycle against the unfenced one. They get
 * `targetedReps` repetitions, the other rows `reps`.
 */
export const uncontendedTargetIds: readonly string[] = [
  ...Object.keys(uncontendedMinimumToRaw),
  fencedRowId,
];

/**
 * The contenders that take turns with `id` in one repetition: the raw
 * baseline, the contender `id` is compared with (if any, and known), and
 * `id`; rotated by `shift`, so that which of them takes the first turn
 * changes from one repetition to the next.
 */
export function turnGroup(
  id: string,
  withRaw: boolean,
  shift: number,
): string[] {
  const reference = contender(id).comparedWith;
  const group = [
    ...(withRaw && id !== 'raw' ? ['raw'] : []),
    ...(reference ? [reference] : []),
    id,
  ];
  return rotation(group, shift);
}

/**
 * The worker process that runs `each` in the group of contender `id`: the
 * raw baseline and the contender `id` is compared with run beside it in
 * processes of their own (see workerBeside). When the unfenced
 * `LockService` process also took turns in two other groups, the fenced
 * row lost 15% of B to that alone (0.77x, against 0.91x).
 */
export function workerName(each: string, id: string): string {
  return workerBeside(each, id, 'raw', contender(id).comparedWith);
}

/**
 * A (one loop) and B (`loops` concurrent loops), each loop on its own keys,
 * no contention. Every repetition runs each contender once together with the
 * raw baseline: each in a worker process of its own, both instances open at
 * once, taking turns of `switchMs` over `sliceMs` each (after `warmupMs` of
 * unmeasured turns; see runInTurns), so that the shared machine's slow
 * phases, which come and go within a second, reach both alike. The fenced
 * cycle also takes turns with the unfenced one it is compared with. Every
 * contender has a process of its own, kept for A and B: the raw baseline's
 * never loads Nest or the library, and one library's calls never shape V8's
 * optimisation of the code another one uses too (JMH forks a fresh JVM per
 * benchmark for the same reason).
 */
export async function runUncontended(
  ctx: BenchContext,
  scenario: 'A' | 'B',
  workers: NamedWorkers,
  ids: readonly string[] = uncontendedIds,
): Promise<UncontendedResult> {
  const { reps, warmupMs, sliceMs, switchMs, loopsB } = ctx.config.uncontended;
  const allReps = repetitionsFor(ctx, ids);
  const loops = scenario === 'A' ? 1 : loopsB;
  const slices = new Map<string, UncontendedSlice[]>(ids.map((id) => [id, []]));
  const errors = new Map<string, string>();
  const others = ids.filter((id) => id !== 'raw');
  const withRaw = ids.includes('raw');
  /**
   * Each contender of repetition `rep` with the group it takes turns in;
   * after `reps`, only the targeted ones.
   */
  const groups = (rep: number) =>
    (others.length > 0 ? rotation(others, rep) : ids)
      .map((id, index) => ({
        id,
        group: turnGroup(id, withRaw, rep + index),
      }))
      .filter(({ id }) => rep < reps || uncontendedTargetIds.includes(id));
  // Started all at once: they load while the first groups run.
  for (const { id, group } of groups(0))
    for (const each of group) workers.for(workerName(each, id));
  for (let rep = 0; rep < allReps; rep++) {
    for (const { id, group } of groups(rep)) {
      ctx.progress.step(
        `${scenario}: ${group.join(' | ')} (rep ${rep + 1}/${rep < reps ? reps : allReps})`,
      );
      if (group.some((each) => errors.has(each))) continue;
      const outcome = await runInTurns(
        group.map((each) =>
          workers.side(
            each,
            { type: 'open', contenderId: each, urls: [ctx.server.url] },
            ctx.config.jitWarmupMs,
            workerName(each, id),
          ),
        ),
        {
          prefix: `bench:${scenario}:${rep}`,
          loops,
          ttlMs: ctx.config.ttlMs,
          warmupMs,
          sliceMs,
          switchMs,
        },
      ).catch((error: unknown) => ({
        failed: { id, error: errorText(error) },
      }));
      await ctx.admin.flushall();
      if ('failed' in outcome) {
        const { id: failed, error } = outcome.failed;
        errors.set(failed, error);
        ctx.progress.log(`${scenario}: ${failed} failed: ${error}`);
        // It may be stuck in a turn: nothing more runs in that process.
        await workers.discard(failed);
        continue;
      }
      const base = outcome.slices.raw;
      const own = outcome.slices[id];
      const reference = contender(id).comparedWith;
      if (base) slices.get('raw')?.push(base);
      if (own && id !== 'raw') {
        slices.get(id)?.push({
          ...own,
          baselineCyclesPerSec: base?.cyclesPerSec,
          referenceCyclesPerSec: reference
            ? outcome.slices[reference]?.cyclesPerSec
            : undefined,
        });
      }
    }
  }
  const promises = new Map<string, number>();
  if (scenario === 'B') {
    for (const id of ids) {
      if (errors.has(id)) continue;
      ctx.progress.step(`B: promises per cycle, ${id}`);
      try {
        promises.set(id, await countPromises(ctx, id));
      } catch (error) {
        ctx.progress.log(
          `B: counting promises of ${id} failed: ${errorText(error)}`,
        );
      } finally {
        await ctx.admin.flushall();
      }
    }
  }
  return {
    scenario,
    loops,
    reps,
    targetedReps: allReps,
    sliceMs,
    switchMs: ctx.config.uncontended.switchMs,
    turnsAcrossProcesses: true,
    rows: ids.map((id) => {
      const c = contender(id);
      const s = slices.get(id)!;
      const m = (pick: (x: UncontendedSlice) => number) => median(s.map(pick));
      return {
        id,
        label: c.label,
        detail: c.detail,
        comparedWith: c.comparedWith,
        slices: s,
        error: errors.get(id),
        cyclesPerSec: m((x) => x.cyclesPerSec),
        acquireP50: m((x) => x.acquire.p50),
        acquireP99: m((x) => x.acquire.p99),
        releaseP50: m((x) => x.release.p50),
        releaseP99: m((x) => x.release.p99),
        cycleP50: m((x) => x.cycle.p50),
        cycleP99: m((x) => x.cycle.p99),
        nodeCpuUsPerCycle: m((x) => x.nodeCpuUsPerCycle),
        promisesPerCycle: promises.get(id),
      };
    }),
  };
}

/** The targeted rows among `ids`. */
function targetedAmong(ids: readonly string[]): string[] {
  return ids.filter((id) => uncontendedTargetIds.includes(id));
}

/** Repetitions of the targeted rows among `ids`: `targetedReps` when any is there. */
function repetitionsFor(ctx: BenchContext, ids: readonly string[]): number {
  const { reps, targetedReps } = ctx.config.uncontended;
  return targetedAmong(ids).length > 0 ? Math.max(reps, targetedReps) : reps;
}

/** Steps in one scenario: each contender beside the raw baseline, per repetition. */
export function plannedUncontended(
  ctx: BenchContext,
  ids: readonly string[],
): number {
  const { reps } = ctx.config.uncontended;
  const extra = repetitionsFor(ctx, ids) - reps;
  return reps * Math.max(1, ids.length - 1) + extra * targetedAmong(ids).length;
}

/**
 * Promises the process creates per uncontended cycle of `id`, counted by an
 * async hook over sequential cycles after a warm-up, in the benchmark's own
 * process (a count, not a timing). Every one is work for Node, and a hook
 * call more where an AsyncLocalStorage is in use (the decorator's lock
 * scope).
 */
async function countPromises(ctx: BenchContext, id: string): Promise<number> {
  const instance = await openContender(id, { urls: [ctx.server.url] });
  const ttlMs = ctx.config.ttlMs;
  const cycle = async () => {
    const held = await instance.acquire('bench:B:promises', { ttlMs });
    await held.release();
  };
  try {
    for (let n = 0; n < 200; n++) await cycle();
    let promises = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === 'PROMISE') promises += 1;
      },
    });
    const cycles = 1000;
    hook.enable();
    try {
      for (let n = 0; n < cycles; n++) await cycle();
    } finally {
      hook.disable();
    }
    return promises / cycles;
  } finally {
    await instance.close();
  }
}

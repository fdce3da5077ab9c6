import type { UncontendedSlice } from '../scenarios/uncontended.js';
import { errorText, withTimeout } from '../scenarios/context.js';
import type { BenchWorker } from './pool.js';
import type { OpenRequest } from './protocol.js';

/** One side of a group that takes turns: its worker, and what the worker opens. */
export interface TurnSide {
  /** Names the side in its keys and in a failure. */
  readonly id: string;
  readonly worker: BenchWorker;
  readonly open: OpenRequest;
  /** An unmeasured turn this long, alone, before the group's turns (a fresh worker's JIT warm-up). */
  readonly jitWarmupMs?: number;
}

/** How a group takes its turns. */
export interface TurnsPlan {
  /** Start of every key (each side adds its id). */
  readonly prefix: string;
  readonly loops: number;
  readonly ttlMs: number;
  readonly warmupMs: number;
  /** Measured time of each side. */
  readonly sliceMs: number;
  readonly switchMs: number;
}

/** Each side's slice, or the side that failed (the others are not to blame). */
export type TurnsOutcome =
  | { readonly slices: Record<string, UncontendedSlice> }
  | { readonly failed: { readonly id: string; readonly error: string } };

/** A failure of one side, named so that the others are not blamed. */
class SideFailure extends Error {
  constructor(
    readonly id: string,
    override readonly cause: unknown,
  ) {
    super(`${id} failed`);
  }
}

/** Longest a request of the turns may take beyond its own time. */
const requestSlackMs = 30_000;

/**
 * Runs `sides`, each in its own worker process with its instance open for the
 * whole group, in turns of `switchMs`: the parent asks one worker for a turn,
 * waits for its tally, then asks the next, so that only one side runs at a
 * time and the machine's slow phases, which come and go within a second,
 * reach every side alike. Warm-up turns first (tallied apart and dropped),
 * then measured ones until each side had `sliceMs`; the latencies come from
 * each worker at the end.
 */
export async function runInTurns(
  sides: readonly TurnSide[],
  plan: TurnsPlan,
): Promise<TurnsOutcome> {
  const { loops, ttlMs, warmupMs, sliceMs, switchMs } = plan;
  const opened: TurnSide[] = [];
  const onSide = async <T>(
    side: TurnSide,
    what: string,
    work: () => Promise<T>,
    ms: number,
  ): Promise<T> => {
    try {
      return await withTimeout(
        work(),
        ms + requestSlackMs,
        `${side.id} ${what}`,
      );
    } catch (error) {
      throw new SideFailure(side.id, error);
    }
  };
  try {
    for (const side of sides) {
      await onSide(side, 'start', () => side.worker.ready, 0);
      await onSide(side, 'open', () => side.worker.request(side.open), 0);
      opened.push(side);
    }
    for (const side of sides) {
      const ms = side.jitWarmupMs ?? 0;
      if (ms <= 0) continue;
      const spec = {
        prefix: `${plan.prefix}:${side.id}:jit`,
        loops,
        ttlMs,
        ms,
        measured: false,
      };
      await onSide(
        side,
        'warm-up',
        () => side.worker.request({ type: 'turn', spec }),
        ms,
      );
    }
    const tallies = sides.map(() => ({ cycles: 0, ms: 0, cpuUs: 0 }));
    const turns = Math.max(1, Math.round(sliceMs / switchMs));
    const warmTurns = Math.ceil(warmupMs / switchMs);
    for (let turn = 0; turn < warmTurns + turns; turn++) {
      const measured = turn >= warmTurns;
      for (const [index, side] of sides.entries()) {
        const spec = {
          prefix: `${plan.prefix}:${side.id}`,
          loops,
          ttlMs,
          ms: switchMs,
          measured,
        };
        const reply = await onSide(
          side,
          'turn',
          () => side.worker.request({ type: 'turn', spec }),
          switchMs,
        );
        if (!measured) continue;
        const tally = tallies[index];
        tally.cycles += reply.turn!.cycles;
        tally.ms += reply.turn!.ms;
        tally.cpuUs += reply.turn!.cpuUs;
      }
    }
    const slices: Record<string, UncontendedSlice> = {};
    for (const [index, side] of sides.entries()) {
      const { latencies } = await onSide(
        side,
        'latencies',
        () => side.worker.request({ type: 'turn-latencies' }),
        0,
      );
      const { cycles, ms, cpuUs } = tallies[index];
      slices[side.id] = {
        cyclesPerSec: (cycles * 1000) / ms,
        nodeCpuUsPerCycle: cycles > 0 ? cpuUs / cycles : Number.NaN,
        ...latencies!,
      };
    }
    return { slices };
  } catch (error) {
    if (!(error instanceof SideFailure)) throw error;
    return { failed: { id: error.id, error: errorText(error.cause) } };
  } finally {
    await Promise.all(
      opened.map((side) =>
        withTimeout(
          side.worker.request({ type: 'close' }),
          requestSlackMs,
          `${side.id} close`,
        ).catch(() => undefined),
      ),
    );
  }
}

import { performance } from 'node:perf_hooks';
import { contender } from '../contenders/index.js';
import type { ContenderInstance } from '../contenders/types.js';
import { summarize } from '../stats.js';
import { errorText } from './context.js';
import type { UncontendedSlice } from './uncontended.js';

/** Turns of one or two contenders, whatever they run on (see {@link runInTurns}). */
export interface TurnsSpec {
  /** A contender and the raw baseline, in the order of their turns; or one alone. */
  readonly ids: readonly string[];
  /** Start of every key. */
  readonly prefix: string;
  readonly loops: number;
  readonly ttlMs: number;
  readonly warmupMs: number;
  readonly sliceMs: number;
  readonly switchMs: number;
}

/** One repetition of A or B for one or two contenders, as a worker process runs it. */
export interface SideBySideSpec extends TurnsSpec {
  readonly url: string;
}

/** Each contender's slice, or the one that failed (the other is not to blame). */
export type SideBySideOutcome =
  | { readonly slices: Record<string, UncontendedSlice> }
  | { readonly failed: { readonly id: string; readonly error: string } };

/** A failure of one contender in a side-by-side slice, named so the other is not blamed. */
class ContenderFailure extends Error {
  constructor(
    readonly id: string,
    override readonly cause: unknown,
  ) {
    super(`${id} failed`);
  }
}

/** What one contender did over its turns of a slice. */
class TurnTally {
  cycles = 0;
  ms = 0;
  cpuUs = 0;
  readonly acquire: number[] = [];
  readonly release: number[] = [];
  readonly cycle: number[] = [];

  slice(): UncontendedSlice {
    return {
      cyclesPerSec: (this.cycles * 1000) / this.ms,
      nodeCpuUsPerCycle:
        this.cycles > 0 ? this.cpuUs / this.cycles : Number.NaN,
      acquire: summarize(this.acquire),
      release: summarize(this.release),
      cycle: summarize(this.cycle),
    };
  }
}

/**
 * Runs the contenders of `spec`, each with its own instance, in turns of
 * `switchMs`: warm-up turns first, then measured ones until each had
 * `sliceMs`. A turn ends when its time is up and every loop has finished the
 * cycle it was in; that tail counts, so a contender's slow cycles cost it
 * throughput.
 *
 * No forced garbage collection before the turns: what garbage there is
 * comes from this worker's own library and the baseline, and a forced full
 * collection slowed the turns right after it, ours more than the baseline's:
 * A's median ratio of ours to raw was 0.92 with it and 1.01 without, over 9
 * repetitions each.
 */
export function runSideBySide(
  spec: SideBySideSpec,
): Promise<SideBySideOutcome> {
  return runInTurns(spec, (id) => contender(id).create({ urls: [spec.url] }));
}

/**
 * The turns of {@link runSideBySide} for instances that `open` makes of each
 * of `spec.ids` (H opens them on a Sentinel group, a Cluster, a quorum).
 */
export async function runInTurns(
  spec: TurnsSpec,
  open: (id: string) => Promise<ContenderInstance>,
): Promise<SideBySideOutcome> {
  const { ids, loops, warmupMs, sliceMs, switchMs } = spec;
  const instances: ContenderInstance[] = [];
  try {
    for (const id of ids) {
      try {
        instances.push(await open(id));
      } catch (error) {
        throw new ContenderFailure(id, error);
      }
    }
    const measured = ids.map(() => new TurnTally());
    // Cycles started by each loop of each contender, warm-up included: A's
    // keys rotate on across turns, so that no key is reused soon.
    const started = ids.map(() => Array.from({ length: loops }, () => 0));
    const turns = Math.max(1, Math.round(sliceMs / switchMs));
    const warmTurns = Math.ceil(warmupMs / switchMs);
    for (let turn = 0; turn < warmTurns + turns; turn++) {
      for (const [index, id] of ids.entries()) {
        // Warm-up turns are tallied apart and dropped.
        const tally = turn < warmTurns ? new TurnTally() : measured[index];
        try {
          await runTurn(
            instances[index],
            `${spec.prefix}:${id}`,
            spec,
            started[index],
            tally,
          );
        } catch (error) {
          throw new ContenderFailure(id, error);
        }
      }
    }
    return {
      slices: Object.fromEntries(
        ids.map((id, index) => [id, measured[index].slice()]),
      ),
    };
  } catch (error) {
    if (!(error instanceof ContenderFailure)) throw error;
    return { failed: { id: error.id, error: errorText(error.cause) } };
  } finally {
    await Promise.all(instances.map((instance) => instance.close()));
  }
}

/** One contender's turn: its loops cycle for `ms`, then finish the cycle they are in. */
async function runTurn(
  instance: ContenderInstance,
  prefix: string,
  { loops, ttlMs, switchMs }: TurnsSpec,
  started: number[],
  tally: TurnTally,
): Promise<void> {
  const start = performance.now();
  const cpuAtStart = process.cpuUsage();
  const end = start + switchMs;
  const loop = async (index: number) => {
    for (let t0 = performance.now(); t0 < end; t0 = performance.now()) {
      const n = started[index]++;
      // A rotates over 1,000 keys; each loop of B keeps to its own key.
      const key = loops === 1 ? `${prefix}:${n % 1000}` : `${prefix}:${index}`;
      const held = await instance.acquire(key, { ttlMs });
      const t1 = performance.now();
      await held.release();
      const t2 = performance.now();
      tally.cycles += 1;
      tally.acquire.push(t1 - t0);
      tally.release.push(t2 - t1);
      tally.cycle.push(t2 - t0);
    }
  };
  await Promise.all(Array.from({ length: loops }, (_, i) => loop(i)));
  const cpu = process.cpuUsage(cpuAtStart);
  tally.ms += performance.now() - start;
  tally.cpuUs += cpu.user + cpu.system;
}

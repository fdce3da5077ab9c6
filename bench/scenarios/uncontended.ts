import { createHook } from 'node:async_hooks';
import { contender, uncontendedIds } from '../contenders/index.js';
import { median, type LatencySummary } from '../stats.js';
import { BenchWorker } from '../workers/pool.js';
import {
  errorText,
  rotation,
  withTimeout,
  type BenchContext,
} from './context.js';
import type { SideBySideSpec } from './side-by-side.js';

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
}

export interface UncontendedRow {
  readonly id: string;
  readonly label: string;
  readonly detail: string;
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
  readonly sliceMs: number;
  /** Length of a turn in a side-by-side slice (absent in runs from before turns). */
  readonly switchMs?: number;
  readonly rows: UncontendedRow[];
}

/**
 * A (one loop) and B (`loops` concurrent loops), each loop on its own keys,
 * no contention. Every repetition runs each contender once, side by side with
 * the raw baseline: both are open at once and take turns of `switchMs` over
 * `sliceMs` each (after `warmupMs` of unmeasured turns), so that the shared
 * machine's slow phases, which come and go within a second, reach both alike.
 * Each library's contenders run, with their raw partners, in a worker process
 * of their own: in one process for all, whichever library ran before would
 * leave V8's type feedback in the code they share (ioredis, Node's streams)
 * shaped by its calls, and slow down whoever calls it differently (JMH forks
 * a fresh JVM per benchmark for the same reason).
 */
export async function runUncontended(
  ctx: BenchContext,
  scenario: 'A' | 'B',
  workers: UncontendedWorkers,
  ids: readonly string[] = uncontendedIds,
): Promise<UncontendedResult> {
  const { reps, warmupMs, sliceMs, switchMs, loopsB } = ctx.config.uncontended;
  const loops = scenario === 'A' ? 1 : loopsB;
  const slices = new Map<string, UncontendedSlice[]>(ids.map((id) => [id, []]));
  const errors = new Map<string, string>();
  const others = ids.filter((id) => id !== 'raw');
  const withRaw = ids.includes('raw');
  // Started all at once: they load while the first pairs run.
  for (const id of others.length > 0 ? others : ids) workers.for(id);
  const run = async (
    id: string,
    pair: readonly string[],
    rep: number,
  ): Promise<Record<string, UncontendedSlice>> => {
    ctx.progress.step(
      `${scenario}: ${pair.join(' | ')} (rep ${rep + 1}/${reps})`,
    );
    if (pair.some((each) => errors.has(each))) return {};
    const spec: SideBySideSpec = {
      ids: pair,
      url: ctx.server.url,
      prefix: `bench:${scenario}:${rep}`,
      loops,
      ttlMs: ctx.config.ttlMs,
      warmupMs,
      sliceMs,
      switchMs,
    };
    const fail = (failed: string, text: string) => {
      errors.set(failed, text);
      ctx.progress.log(`${scenario}: ${failed} failed: ${text}`);
      return {};
    };
    const worker = workers.for(id);
    try {
      await worker.ready;
      const reply = await withTimeout(
        worker.request({ type: 'side-by-side', spec }),
        2 * (warmupMs + sliceMs) + 60_000,
        `${scenario} side by side with ${id}`,
      );
      const outcome = reply.sideBySide!;
      if ('failed' in outcome)
        return fail(outcome.failed.id, outcome.failed.error);
      return outcome.slices;
    } catch (error) {
      // The worker itself failed or hung: nothing more runs in it.
      await workers.discard(id);
      return fail(id, errorText(error));
    } finally {
      await ctx.admin.flushall();
    }
  };
  for (let rep = 0; rep < reps; rep++) {
    for (const [index, id] of rotation(others, rep).entries()) {
      // Which of the two takes the first turn alternates.
      const pair = !withRaw
        ? [id]
        : (rep + index) % 2 === 0
          ? ['raw', id]
          : [id, 'raw'];
      const measured = await run(id, pair, rep);
      const own = measured[id];
      const base = measured.raw;
      if (base) slices.get('raw')!.push(base);
      if (own) {
        slices
          .get(id)!
          .push(
            base ? { ...own, baselineCyclesPerSec: base.cyclesPerSec } : own,
          );
      }
    }
    if (others.length === 0 && withRaw) {
      const base = (await run('raw', ['raw'], rep)).raw;
      if (base) slices.get('raw')!.push(base);
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
    sliceMs,
    switchMs: ctx.config.uncontended.switchMs,
    rows: ids.map((id) => {
      const c = contender(id);
      const s = slices.get(id)!;
      const m = (pick: (x: UncontendedSlice) => number) => median(s.map(pick));
      return {
        id,
        label: c.label,
        detail: c.detail,
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

/**
 * The worker processes of A and B: one per library (see Contender.library),
 * started when first needed and kept for both scenarios (a start costs about
 * a second of CPU). The raw baseline runs in each of them beside the
 * contender, or in one of its own when alone.
 */
export class UncontendedWorkers {
  private readonly workers = new Map<string, BenchWorker>();

  /** The worker that runs contender `id`. */
  for(id: string): BenchWorker {
    const library = contender(id).library;
    let worker = this.workers.get(library);
    if (!worker) {
      worker = new BenchWorker();
      this.workers.set(library, worker);
    }
    return worker;
  }

  /** Stops the worker that runs `id`; the next {@link for} starts a new one. */
  async discard(id: string): Promise<void> {
    const library = contender(id).library;
    const worker = this.workers.get(library);
    this.workers.delete(library);
    await worker?.stop();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.workers.values()].map((w) => w.stop()));
    this.workers.clear();
  }
}

/** Steps in one scenario: each contender beside the raw baseline, per repetition. */
export function plannedUncontended(ctx: BenchContext, count: number): number {
  return ctx.config.uncontended.reps * Math.max(1, count - 1);
}

/**
 * Promises the process creates per uncontended cycle of `id`, counted by an
 * async hook over sequential cycles after a warm-up. Every one is work for
 * Node, and a hook call more while an AsyncLocalStorage is in use.
 */
async function countPromises(ctx: BenchContext, id: string): Promise<number> {
  const instance = await contender(id).create({ urls: [ctx.server.url] });
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

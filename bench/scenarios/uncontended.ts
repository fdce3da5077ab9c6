import { createHook } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { contender, uncontendedIds } from '../contenders/index.js';
import { collectGarbage } from '../gc.js';
import { median, summarize, type LatencySummary } from '../stats.js';
import { errorText, rotation, type BenchContext } from './context.js';

/** One slice of A or B for one contender. */
export interface UncontendedSlice {
  readonly cyclesPerSec: number;
  /** A: acquisition latency; B: whole cycle latency (acquire + release). */
  readonly acquire: LatencySummary;
  readonly release: LatencySummary;
  readonly cycle: LatencySummary;
  /** CPU time (user + system) of the benchmark process per cycle, in µs. */
  readonly nodeCpuUsPerCycle: number;
  /** cycles/s of the raw baseline's slice run right beside this one. */
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
  readonly rows: UncontendedRow[];
}

/**
 * A (one loop) and B (`loops` concurrent loops), each loop on its own keys,
 * no contention. Contenders run in interleaved slices: every repetition runs
 * each contender once, for `sliceMs` after `warmupMs` of unmeasured warm-up.
 */
export async function runUncontended(
  ctx: BenchContext,
  scenario: 'A' | 'B',
  ids: readonly string[] = uncontendedIds,
): Promise<UncontendedResult> {
  const { reps, warmupMs, sliceMs, loopsB } = ctx.config.uncontended;
  const loops = scenario === 'A' ? 1 : loopsB;
  const slices = new Map<string, UncontendedSlice[]>(ids.map((id) => [id, []]));
  const errors = new Map<string, string>();
  const run = async (id: string, rep: number) => {
    ctx.progress.step(`${scenario}: ${id} (rep ${rep + 1}/${reps})`);
    if (errors.has(id)) return undefined;
    try {
      return await runSlice(ctx, scenario, id, rep, loops, warmupMs, sliceMs);
    } catch (error) {
      errors.set(id, errorText(error));
      ctx.progress.log(`${scenario}: ${id} failed: ${errorText(error)}`);
      return undefined;
    } finally {
      await ctx.admin.flushall();
    }
  };
  const others = ids.filter((id) => id !== 'raw');
  const withRaw = ids.includes('raw');
  for (let rep = 0; rep < reps; rep++) {
    for (const [index, id] of rotation(others, rep).entries()) {
      // Every slice is paired with a slice of the raw baseline right beside
      // it, first before and then after it: the machine's slow phases last
      // seconds, longer than a repetition's distance between two slices.
      const rawFirst = withRaw && (rep + index) % 2 === 0;
      const before = rawFirst ? await run('raw', rep) : undefined;
      const own = await run(id, rep);
      const base = rawFirst || !withRaw ? before : await run('raw', rep);
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
      const base = await run('raw', rep);
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

/** Slices in one scenario: each contender's, and a raw one beside each of them. */
export function plannedUncontended(ctx: BenchContext, count: number): number {
  return ctx.config.uncontended.reps * Math.max(1, 2 * (count - 1));
}

async function runSlice(
  ctx: BenchContext,
  scenario: string,
  id: string,
  rep: number,
  loops: number,
  warmupMs: number,
  sliceMs: number,
): Promise<UncontendedSlice> {
  const instance = await contender(id).create({ urls: [ctx.server.url] });
  const ttlMs = ctx.config.ttlMs;
  const acquire: number[] = [];
  const release: number[] = [];
  const cycle: number[] = [];
  let cycles = 0;
  try {
    // The slice before left garbage of its own: collect it now, or a major
    // collection lands in this slice and charges it to this contender (seen
    // in B, where whichever contender ran right after the raw baseline lost
    // 10-15%).
    collectGarbage();
    const warmEnd = performance.now() + warmupMs;
    const end = warmEnd + sliceMs;
    // The process's CPU time over the measured window, read by timers at its
    // edges (the loops give the event loop a turn after every call).
    let cpuAtWarmEnd: NodeJS.CpuUsage | undefined;
    let cpuInWindow: NodeJS.CpuUsage | undefined;
    const marks = [
      setTimeout(() => (cpuAtWarmEnd = process.cpuUsage()), warmupMs),
      setTimeout(
        () => (cpuInWindow = process.cpuUsage(cpuAtWarmEnd)),
        warmupMs + sliceMs,
      ),
    ];
    const loop = async (index: number) => {
      const prefix = `bench:${scenario}:${id}:${rep}:${index}`;
      for (let n = 0; ; n++) {
        const t0 = performance.now();
        if (t0 >= end) return;
        // A rotates over 1,000 keys; each loop of B keeps to its own key.
        const key = loops === 1 ? `${prefix}:${n % 1000}` : prefix;
        const held = await instance.acquire(key, { ttlMs });
        const t1 = performance.now();
        await held.release();
        const t2 = performance.now();
        // Counted by completion inside the measured window.
        if (t2 >= warmEnd && t2 < end) {
          cycles += 1;
          acquire.push(t1 - t0);
          release.push(t2 - t1);
          cycle.push(t2 - t0);
        }
      }
    };
    await Promise.all(Array.from({ length: loops }, (_, i) => loop(i)));
    for (const mark of marks) clearTimeout(mark);
    cpuInWindow ??= process.cpuUsage(cpuAtWarmEnd);
    return {
      cyclesPerSec: (cycles * 1000) / sliceMs,
      nodeCpuUsPerCycle:
        cycles > 0
          ? (cpuInWindow.user + cpuInWindow.system) / cycles
          : Number.NaN,
      acquire: summarize(acquire),
      release: summarize(release),
      cycle: summarize(cycle),
    };
  } finally {
    await instance.close();
  }
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

import { performance } from 'node:perf_hooks';
import type { ContenderInstance } from '../contenders/types.js';
import { summarize, type LatencySummary } from '../stats.js';

/** One turn of one side, as the parent asks a worker for it. */
export interface TurnSpec {
  /** Start of every key of this side. */
  readonly prefix: string;
  readonly loops: number;
  readonly ttlMs: number;
  /** How long the loops start new cycles. */
  readonly ms: number;
  /** Warm-up turns run like the others, but their latencies are not kept. */
  readonly measured: boolean;
}

/** What one turn did. */
export interface TurnTally {
  readonly cycles: number;
  readonly ms: number;
  /** CPU time (user + system) of the worker process over the turn. */
  readonly cpuUs: number;
}

/** Latencies over the measured turns, in ms. */
export interface TurnLatencies {
  readonly acquire: LatencySummary;
  readonly release: LatencySummary;
  readonly cycle: LatencySummary;
}

/**
 * The turns of one open contender instance in a worker process. A turn ends
 * when its time is up and every loop has finished the cycle it was in; that
 * tail counts, so a contender's slow cycles cost it throughput.
 */
export class TurnRunner {
  /** Cycles started by each loop, warm-up included: A's keys rotate on across turns. */
  private readonly started: number[] = [];
  private readonly acquire: number[] = [];
  private readonly release: number[] = [];
  private readonly cycle: number[] = [];

  constructor(private readonly instance: ContenderInstance) {}

  async turn({
    prefix,
    loops,
    ttlMs,
    ms,
    measured,
  }: TurnSpec): Promise<TurnTally> {
    while (this.started.length < loops) this.started.push(0);
    let cycles = 0;
    const start = performance.now();
    const cpuAtStart = process.cpuUsage();
    const end = start + ms;
    const loop = async (index: number) => {
      for (let t0 = performance.now(); t0 < end; t0 = performance.now()) {
        const n = this.started[index]++;
        // A rotates over 1,000 keys; each loop of B keeps to its own key.
        const key =
          loops === 1 ? `${prefix}:${n % 1000}` : `${prefix}:${index}`;
        const held = await this.instance.acquire(key, { ttlMs });
        const t1 = performance.now();
        await held.release();
        const t2 = performance.now();
        cycles += 1;
        if (measured) {
          this.acquire.push(t1 - t0);
          this.release.push(t2 - t1);
          this.cycle.push(t2 - t0);
        }
      }
    };
    await Promise.all(Array.from({ length: loops }, (_, i) => loop(i)));
    const cpu = process.cpuUsage(cpuAtStart);
    return {
      cycles,
      ms: performance.now() - start,
      cpuUs: cpu.user + cpu.system,
    };
  }

  latencies(): TurnLatencies {
    return {
      acquire: summarize(this.acquire),
      release: summarize(this.release),
      cycle: summarize(this.cycle),
    };
  }
}

import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { connectIoredis, quitAll } from '../contenders/clients.js';
import { contender, quorumIds } from '../contenders/index.js';
import { median, summarize, type LatencySummary } from '../stats.js';
import { errorText, rotation, type BenchContext } from './context.js';

export interface QuorumRow {
  readonly id: string;
  readonly label: string;
  readonly slices: { cyclesPerSec: number; cycle: LatencySummary }[];
  readonly error?: string;
  readonly cyclesPerSec: number;
  readonly cycleP50: number;
  readonly cycleP99: number;
  /** Cycle p50 over the raw quorum baseline's. */
  readonly p50Ratio: number;
}

export interface QuorumSize {
  readonly nodes: number;
  readonly rows: QuorumRow[];
}

export interface QuorumResult {
  readonly reps: number;
  readonly sliceMs: number;
  readonly sizes: QuorumSize[];
}

export function plannedQuorum(ctx: BenchContext, count: number): number {
  return ctx.config.quorum.reps * ctx.config.quorum.sizes.length * count;
}

/**
 * D: uncontended sequential cycles over 3 and 5 private servers, each peer in
 * its Redlock (quorum) mode, against the raw quorum baseline.
 */
export async function runQuorum(
  ctx: BenchContext,
  ids: readonly string[] = quorumIds,
): Promise<QuorumResult> {
  const { reps, warmupMs, sliceMs, sizes } = ctx.config.quorum;
  const servers = await ctx.startServers(Math.max(...sizes));
  const admins: Redis[] = await Promise.all(
    servers.map((s) => connectIoredis(s.url)),
  );
  const results: QuorumSize[] = [];
  try {
    for (const nodes of sizes) {
      const urls = servers.slice(0, nodes).map((s) => s.url);
      const slices = new Map<string, QuorumRow['slices']>(
        ids.map((id) => [id, []]),
      );
      const errors = new Map<string, string>();
      for (let rep = 0; rep < reps; rep++) {
        for (const id of rotation(ids, rep)) {
          ctx.progress.step(
            `D: ${nodes} nodes: ${id} (rep ${rep + 1}/${reps})`,
          );
          if (errors.has(id)) continue;
          try {
            slices
              .get(id)!
              .push(await quorumSlice(ctx, id, urls, rep, warmupMs, sliceMs));
          } catch (error) {
            errors.set(id, errorText(error));
            ctx.progress.log(`D: ${id} failed: ${errorText(error)}`);
          }
          await Promise.all(admins.map((a) => a.flushall()));
        }
      }
      const baseP50 = (slices.get('raw-quorum') ?? []).map((s) => s.cycle.p50);
      results.push({
        nodes,
        rows: ids.map((id) => {
          const s = slices.get(id)!;
          return {
            id,
            label: contender(id).label,
            slices: s,
            error: errors.get(id),
            cyclesPerSec: median(s.map((x) => x.cyclesPerSec)),
            cycleP50: median(s.map((x) => x.cycle.p50)),
            cycleP99: median(s.map((x) => x.cycle.p99)),
            // Latency: the ratio of the medians, as everywhere in the report.
            p50Ratio: median(s.map((x) => x.cycle.p50)) / median(baseP50),
          };
        }),
      });
    }
  } finally {
    await quitAll(admins);
  }
  return { reps, sliceMs, sizes: results };
}

async function quorumSlice(
  ctx: BenchContext,
  id: string,
  urls: string[],
  rep: number,
  warmupMs: number,
  sliceMs: number,
) {
  const instance = await contender(id).create({ urls });
  try {
    const cycle: number[] = [];
    const warmEnd = performance.now() + warmupMs;
    const end = warmEnd + sliceMs;
    for (let n = 0; ; n++) {
      const t0 = performance.now();
      if (t0 >= end) break;
      const held = await instance.acquire(`bench:D:${id}:${rep}:${n % 1000}`, {
        ttlMs: ctx.config.ttlMs,
      });
      await held.release();
      const t1 = performance.now();
      if (t1 >= warmEnd && t1 < end) cycle.push(t1 - t0);
    }
    return {
      cyclesPerSec: (cycle.length * 1000) / sliceMs,
      cycle: summarize(cycle),
    };
  } finally {
    await instance.close();
  }
}

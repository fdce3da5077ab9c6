import type { Redis } from 'ioredis';
import { connectIoredis, quitAll } from '../contenders/clients.js';
import { contender, quorumIds } from '../contenders/index.js';
import {
  median,
  medianInterval,
  type LatencySummary,
  type RatioInterval,
} from '../stats.js';
import { NamedWorkers } from '../workers/pool.js';
import { runInTurns } from '../workers/turns.js';
import {
  errorText,
  rotation,
  workerBeside,
  type BenchContext,
} from './context.js';

/** The raw quorum baseline every other contender of D takes turns with. */
const baselineId = 'raw-quorum';

export interface QuorumSlice {
  readonly cyclesPerSec: number;
  readonly cycle: LatencySummary;
  /** The raw quorum baseline's cycle p50 over the turns it took beside this slice. */
  readonly baselineCycleP50?: number;
}

export interface QuorumRow {
  readonly id: string;
  readonly label: string;
  readonly slices: QuorumSlice[];
  readonly error?: string;
  readonly cyclesPerSec: number;
  readonly cycleP50: number;
  readonly cycleP99: number;
  /** Cycle p50 over the raw quorum baseline's: the median of the per-repetition ratios. */
  readonly p50Ratio: number;
  /** Those ratios' median with its interval (absent in runs from before the turns). */
  readonly p50RatioInterval?: RatioInterval;
}

export interface QuorumSize {
  readonly nodes: number;
  readonly rows: QuorumRow[];
}

export interface QuorumResult {
  readonly reps: number;
  readonly sliceMs: number;
  /** Length of a turn beside the baseline (absent in runs from before the turns). */
  readonly switchMs?: number;
  readonly sizes: QuorumSize[];
  /** The baseline ran in a process beside each contender (absent in runs from before). */
  readonly baselineBesideEach?: boolean;
}

export function plannedQuorum(ctx: BenchContext, count: number): number {
  return (
    ctx.config.quorum.reps *
    ctx.config.quorum.sizes.length *
    Math.max(1, count - 1)
  );
}

/**
 * D: uncontended sequential cycles over 3 and 5 private servers, each peer in
 * its Redlock (quorum) mode, against the raw quorum baseline: as in A, each
 * contender takes turns of `switchMs` with the baseline, each in a worker
 * process of its own, and the baseline in one beside each contender.
 */
export async function runQuorum(
  ctx: BenchContext,
  ids: readonly string[] = quorumIds,
): Promise<QuorumResult> {
  const { reps, warmupMs, sliceMs, switchMs, sizes } = ctx.config.quorum;
  const servers = await ctx.startServers(Math.max(...sizes));
  const admins: Redis[] = await Promise.all(
    servers.map((s) => connectIoredis(s.url)),
  );
  const workers = new NamedWorkers();
  const others = ids.filter((id) => id !== baselineId);
  const withBaseline = ids.includes(baselineId);
  const contendersOf = (rep: number) =>
    others.length > 0 ? rotation(others, rep) : ids;
  /** Who takes turns with `id`, the baseline first or second by `shift`. */
  const groupOf = (id: string, shift: number) =>
    rotation(
      withBaseline && id !== baselineId ? [baselineId, id] : [id],
      shift,
    );
  // Started all at once: they load while the first groups run.
  for (const id of contendersOf(0))
    for (const each of groupOf(id, 0))
      workers.for(workerBeside(each, id, baselineId));
  const results: QuorumSize[] = [];
  try {
    for (const nodes of sizes) {
      const urls = servers.slice(0, nodes).map((s) => s.url);
      const slices = new Map<string, QuorumSlice[]>(ids.map((id) => [id, []]));
      const errors = new Map<string, string>();
      for (let rep = 0; rep < reps; rep++) {
        for (const [index, id] of contendersOf(rep).entries()) {
          const group = groupOf(id, rep + index);
          ctx.progress.step(
            `D: ${nodes} nodes: ${group.join(' | ')} (rep ${rep + 1}/${reps})`,
          );
          if (group.some((each) => errors.has(each))) continue;
          const outcome = await runInTurns(
            group.map((each) =>
              workers.side(
                each,
                { type: 'open', contenderId: each, urls },
                ctx.config.jitWarmupMs,
                workerBeside(each, id, baselineId),
              ),
            ),
            {
              prefix: `bench:D:${nodes}:${rep}`,
              loops: 1,
              ttlMs: ctx.config.ttlMs,
              warmupMs,
              sliceMs,
              switchMs,
            },
          ).catch((error: unknown) => ({
            failed: { id, error: errorText(error) },
          }));
          await Promise.all(admins.map((a) => a.flushall()));
          if ('failed' in outcome) {
            errors.set(outcome.failed.id, outcome.failed.error);
            ctx.progress.log(
              `D: ${outcome.failed.id} failed: ${outcome.failed.error}`,
            );
            await workers.discard(outcome.failed.id);
            continue;
          }
          const base = outcome.slices[baselineId];
          const own = outcome.slices[id];
          if (base) slices.get(baselineId)?.push(base);
          if (own && id !== baselineId) {
            slices.get(id)?.push({
              cyclesPerSec: own.cyclesPerSec,
              cycle: own.cycle,
              baselineCycleP50: base?.cycle.p50,
            });
          }
        }
      }
      results.push({
        nodes,
        rows: ids.map((id) => quorumRow(id, slices.get(id)!, errors.get(id))),
      });
    }
  } finally {
    await workers.stop();
    await quitAll(admins);
  }
  return { reps, sliceMs, switchMs, sizes: results, baselineBesideEach: true };
}

function quorumRow(
  id: string,
  slices: QuorumSlice[],
  error: string | undefined,
): QuorumRow {
  const p50Ratios =
    id === baselineId
      ? slices.map(() => 1)
      : slices
          .filter((s) => s.baselineCycleP50 !== undefined)
          .map((s) => s.cycle.p50 / s.baselineCycleP50!);
  const p50RatioInterval = medianInterval(p50Ratios);
  return {
    id,
    label: contender(id).label,
    slices,
    error,
    cyclesPerSec: median(slices.map((x) => x.cyclesPerSec)),
    cycleP50: median(slices.map((x) => x.cycle.p50)),
    cycleP99: median(slices.map((x) => x.cycle.p99)),
    p50Ratio: p50RatioInterval.median,
    p50RatioInterval,
  };
}

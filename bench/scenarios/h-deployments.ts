import type { Redis } from 'ioredis';
import { startRedisCluster } from '../../test/support/redis-cluster.js';
import { startSentinelGroup } from '../../test/support/redis-sentinel.js';
import { connectIoredis, quitAll } from '../contenders/clients.js';
import type { Deployment, DeploymentSide } from '../contenders/deployments.js';
import {
  extent,
  median,
  medianInterval,
  type RatioInterval,
} from '../stats.js';
import { NamedWorkers } from '../workers/pool.js';
import { runInTurns } from '../workers/turns.js';
import { errorText, rotation, type BenchContext } from './context.js';
import type { UncontendedSlice } from './uncontended.js';

export type DeploymentId = 'single' | 'sentinel' | 'cluster' | 'quorum';

/** One side's figures on a deployment: medians over the repetitions. */
export interface DeploymentFigures {
  readonly slices: UncontendedSlice[];
  readonly cyclesPerSec: number;
  readonly cycleP50: number;
  readonly cycleP99: number;
}

export interface DeploymentRow {
  readonly id: DeploymentId;
  readonly label: string;
  /** The module option ours ran with. */
  readonly option: string;
  /** What the raw lock beside it was. */
  readonly rawDetail: string;
  readonly error?: string;
  readonly ours: DeploymentFigures;
  readonly raw: DeploymentFigures;
  /** Median over the repetitions of ours' cycles/s over raw's in the same slice. */
  readonly cyclesRatio: number;
  /** Those ratios' median with its interval (absent in runs from before). */
  readonly cyclesRatioInterval?: RatioInterval;
  /** Ratio of the medians (as for every latency in the report). */
  readonly p50Ratio: number;
  readonly p99Ratio: number;
  /** Smallest and largest per-repetition ratio (the spread behind the figures above). */
  readonly cyclesRatioRange: readonly [number, number];
  readonly p50RatioRange: readonly [number, number];
  readonly p99RatioRange: readonly [number, number];
}

export interface DeploymentsResult {
  readonly reps: number;
  readonly warmupMs: number;
  readonly sliceMs: number;
  readonly switchMs: number;
  /** Ours and raw ran in worker processes of their own (absent in runs from before). */
  readonly turnsAcrossProcesses?: boolean;
  readonly rows: DeploymentRow[];
}

/** H's deployments, in the report's order. */
const deploymentInfo: readonly {
  readonly id: DeploymentId;
  readonly label: string;
  readonly option: string;
  readonly rawDetail: string;
}[] = [
  {
    id: 'single',
    label: 'one Redis',
    option: 'redis: url',
    rawDetail: 'raw lock on the same server',
  },
  {
    id: 'sentinel',
    label: 'Sentinel (1 master, 1 replica, 3 sentinels)',
    option: 'redis: { sentinels, name }',
    rawDetail: 'raw lock on a plain client to the master',
  },
  {
    id: 'cluster',
    label: 'Cluster (3 masters)',
    option: 'cluster: startupNodes',
    rawDetail: 'raw lock on an ioredis Cluster client',
  },
  {
    id: 'quorum',
    label: 'quorum (5 independent servers)',
    option: 'nodes: urls',
    rawDetail: 'raw quorum baseline (as in D)',
  },
];

/** Steps of H: starting the deployments, then one per deployment and repetition. */
export function plannedDeployments(ctx: BenchContext): number {
  return 1 + ctx.config.deployments.reps * deploymentInfo.length;
}

/** A running deployment: where the pair runs, and admin connections to flush its masters. */
interface Running {
  readonly deployment: Deployment;
  readonly admins: readonly Redis[];
}

/**
 * H: sequential uncontended cycles (acquire + release, one loop, rotating
 * over 1,000 keys) of our `LockService` at the module defaults on each
 * deployment, side by side with a raw lock on the same deployment: both open
 * at once, each in a worker process of its own (per deployment, the raw
 * one without our module loaded), taking turns of `switchMs` as in A. The
 * deployments run at once, each repetition visits them in a rotated order,
 * and on each deployment the raw lock takes the first turn in every other
 * repetition.
 */
export async function runDeployments(
  ctx: BenchContext,
): Promise<DeploymentsResult> {
  const { reps, warmupMs, sliceMs, switchMs } = ctx.config.deployments;
  const workers = new NamedWorkers();
  const stops: (() => Promise<void>)[] = [];
  const running = new Map<DeploymentId, Running>();
  const errors = new Map<DeploymentId, string>();
  const slices = new Map<
    DeploymentId,
    { ours: UncontendedSlice; raw: UncontendedSlice }[]
  >(deploymentInfo.map(({ id }) => [id, []]));
  const sides: readonly DeploymentSide[] = ['raw', 'ours'];
  for (const { id } of deploymentInfo)
    for (const side of sides) workers.for(`${id}:${side}`);
  try {
    ctx.progress.step('H: starting Sentinel group, Cluster and 5 servers');
    await startAll(ctx, running, errors, stops);
    for (const [id, error] of errors)
      ctx.progress.log(`H: ${id} failed to start: ${error}`);
    for (let rep = 0; rep < reps; rep++) {
      const order = rotation(
        deploymentInfo.map(({ id }, index) => ({ id, index })),
        rep,
      );
      for (const { id, index } of order) {
        // Which side takes the first turn alternates from one repetition to
        // the next on each deployment (by its place in the list: the place
        // in the rotated order of an even number keeps its parity).
        const group = rotation(sides, rep + index);
        ctx.progress.step(
          `H: ${id}: ${group.join(' | ')} (rep ${rep + 1}/${reps})`,
        );
        const on = running.get(id);
        if (!on || errors.has(id)) continue;
        const outcome = await runInTurns(
          group.map((side) =>
            workers.side(
              side,
              { type: 'open-deployment', side, deployment: on.deployment },
              ctx.config.jitWarmupMs,
              `${id}:${side}`,
            ),
          ),
          {
            prefix: `bench:H:${rep}`,
            loops: 1,
            ttlMs: ctx.config.ttlMs,
            warmupMs,
            sliceMs,
            switchMs,
          },
        ).catch((error: unknown) => ({
          failed: { id: 'ours', error: errorText(error) },
        }));
        await Promise.all(
          on.admins.map((admin) => admin.flushall().catch(() => undefined)),
        );
        if ('failed' in outcome) {
          const text = `${outcome.failed.id}: ${outcome.failed.error}`;
          errors.set(id, text);
          ctx.progress.log(`H: ${id} failed: ${text}`);
          await workers.discard(`${id}:${outcome.failed.id}`);
        } else {
          slices.get(id)!.push({
            ours: outcome.slices.ours,
            raw: outcome.slices.raw,
          });
        }
      }
    }
  } finally {
    await workers.stop();
    for (const { admins } of running.values()) await quitAll(admins);
    await Promise.all(stops.map((stop) => stop().catch(() => undefined)));
  }
  return {
    reps,
    warmupMs,
    sliceMs,
    switchMs,
    turnsAcrossProcesses: true,
    rows: deploymentInfo.map(({ id, label, option, rawDetail }) => {
      const pairs = slices.get(id)!;
      const figures = (side: DeploymentSide): DeploymentFigures => {
        const s = pairs.map((pair) => pair[side]);
        return {
          slices: s,
          cyclesPerSec: median(s.map((x) => x.cyclesPerSec)),
          cycleP50: median(s.map((x) => x.cycle.p50)),
          cycleP99: median(s.map((x) => x.cycle.p99)),
        };
      };
      const ours = figures('ours');
      const raw = figures('raw');
      const perRep = (pick: (x: UncontendedSlice) => number) =>
        pairs.map((pair) => pick(pair.ours) / pick(pair.raw));
      const cycles = perRep((x) => x.cyclesPerSec);
      const cyclesRatioInterval = medianInterval(cycles);
      return {
        id,
        label,
        option,
        rawDetail,
        error: errors.get(id),
        ours,
        raw,
        cyclesRatio: cyclesRatioInterval.median,
        cyclesRatioInterval,
        p50Ratio: ours.cycleP50 / raw.cycleP50,
        p99Ratio: ours.cycleP99 / raw.cycleP99,
        cyclesRatioRange: extent(cycles),
        p50RatioRange: extent(perRep((x) => x.cycle.p50)),
        p99RatioRange: extent(perRep((x) => x.cycle.p99)),
      };
    }),
  };
}

/**
 * Starts the deployments at once: one Redis is the context's server, the
 * others are new (stopped through `stops`). A deployment that fails to start
 * gets its error, and the others run.
 */
async function startAll(
  ctx: BenchContext,
  running: Map<DeploymentId, Running>,
  errors: Map<DeploymentId, string>,
  stops: (() => Promise<void>)[],
): Promise<void> {
  const start = async (
    id: DeploymentId,
    open: () => Promise<Running>,
  ): Promise<void> => {
    try {
      running.set(id, await open());
    } catch (error) {
      errors.set(id, `could not start: ${errorText(error)}`);
    }
  };
  await Promise.all([
    start('single', async () => ({
      deployment: { kind: 'single', url: ctx.server.url },
      admins: [await connectIoredis(ctx.server.url)],
    })),
    start('sentinel', async () => {
      const group = await startSentinelGroup();
      stops.push(() => group.stop());
      return {
        deployment: {
          kind: 'sentinel',
          sentinels: group.sentinels,
          name: group.name,
          masterUrl: group.master.url,
        },
        admins: [await connectIoredis(group.master.url)],
      };
    }),
    start('cluster', async () => {
      const cluster = await startRedisCluster({ masters: 3 });
      stops.push(() => cluster.stop());
      return {
        deployment: { kind: 'cluster', startupNodes: cluster.startupNodes },
        admins: await Promise.all(
          cluster.masters.map((node) => connectIoredis(node.server.url)),
        ),
      };
    }),
    start('quorum', async () => {
      // Stopped by the runner, as every server of ctx.startServers.
      const servers = await ctx.startServers(5);
      const urls = servers.map((server) => server.url);
      return {
        deployment: { kind: 'quorum', urls },
        admins: await Promise.all(urls.map((url) => connectIoredis(url))),
      };
    }),
  ]);
}

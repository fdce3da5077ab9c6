import { performance } from 'node:perf_hooks';
import { LockService, RedisLockBackend } from '@app/distributed-lock';
import { createContext } from '../contenders/ours.js';
import { collectGarbage } from '../gc.js';
import { slope } from '../stats.js';
import { errorText, type BenchContext } from './context.js';

/** What the process and Redis hold at a quiet moment (no lock call in flight). */
export interface SoakSnapshot {
  readonly cycles: number;
  readonly heapUsedBytes: number;
  readonly rssBytes: number;
  /** Listeners on `process` plus on the LockService's `events`. */
  readonly listeners: number;
  /** process.getActiveResourcesInfo(), by kind. */
  readonly resources: Record<string, number>;
  /** Every active resource other than timers: sockets, servers, pipes (absent in runs from before). */
  readonly handles?: number;
  readonly timers: number;
  /** Redis connections other than the benchmark's admin connection. */
  readonly redisConnections: number;
  /** Channel + pattern + shard subscriptions over those connections. */
  readonly redisSubscriptions: number;
  readonly redisKeys: number;
  readonly redisUsedMemoryBytes: number;
  /** Sizes of the library's internal collections (diagnostic; private fields). */
  readonly internals: Record<string, number>;
}

export interface SoakResult {
  readonly cycles: number;
  readonly loops: number;
  readonly keys: number;
  readonly cyclesPerSec: number;
  readonly gcExposed: boolean;
  readonly snapshots: SoakSnapshot[];
  /** Heap growth from the first checkpoint (after warm-up) to the last. */
  readonly heapGrowthBytes: number;
  /** Least-squares heap slope over the checkpoints, bytes per 100,000 cycles. */
  readonly heapSlopePer100k: number;
  readonly grew: string[];
  readonly failures: number;
  readonly error?: string;
}

/** Heap growth after warm-up below this (after a full GC) counts as none. */
export const heapToleranceBytes = 2 * 1024 * 1024;

export function plannedSoak(ctx: BenchContext): number {
  return ctx.config.soak.checkpoints;
}

/**
 * G: a long run of lock cycles under contention through LockService (`loops`
 * loops over `keys` keys), paused at checkpoints to read the heap, listeners,
 * timers and Redis connections while nothing is in flight.
 */
export async function runSoak(ctx: BenchContext): Promise<SoakResult> {
  const { cycles, loops, keys, checkpoints } = ctx.config.soak;
  const app = await createContext({ redis: ctx.server.url });
  const locks = app.get(LockService);
  const adminId = Number(await ctx.admin.client('ID'));
  const snapshots: SoakSnapshot[] = [];
  let done = 0;
  let failures = 0;
  let gcExposed = false;
  let error: string | undefined;
  let measuredMs = 0;

  const snapshot = async (): Promise<SoakSnapshot> => {
    // Let closing work (a release's tail, a timer's callback) settle.
    await new Promise((resolve) => setTimeout(resolve, 50));
    gcExposed = collectGarbage();
    const memory = process.memoryUsage();
    const resources: Record<string, number> = {};
    for (const kind of process.getActiveResourcesInfo()) {
      resources[kind] = (resources[kind] ?? 0) + 1;
    }
    const clientList = String(await ctx.admin.client('LIST'));
    let redisConnections = 0;
    let redisSubscriptions = 0;
    for (const line of clientList.split('\n').filter(Boolean)) {
      const fields = Object.fromEntries(
        line.split(' ').map((kv) => kv.split('=') as [string, string]),
      );
      if (Number(fields.id) === adminId) continue;
      redisConnections += 1;
      redisSubscriptions +=
        Number(fields.sub ?? 0) +
        Number(fields.psub ?? 0) +
        Number(fields.ssub ?? 0);
    }
    const info = String(await ctx.admin.info('memory'));
    const used = /used_memory:(\d+)/.exec(info);
    const listeners =
      process
        .eventNames()
        .reduce((sum, name) => sum + process.listenerCount(name), 0) +
      locks.events
        .eventNames()
        .reduce(
          (sum, name) => sum + locks.events.listenerCount(name as 'lost'),
          0,
        );
    return {
      cycles: done,
      heapUsedBytes: memory.heapUsed,
      rssBytes: memory.rss,
      listeners,
      resources,
      handles: Object.entries(resources)
        .filter(([kind]) => kind !== 'Timeout')
        .reduce((sum, [, n]) => sum + n, 0),
      timers: resources.Timeout ?? 0,
      redisConnections,
      redisSubscriptions,
      redisKeys: Number(await ctx.admin.dbsize()),
      redisUsedMemoryBytes: used ? Number(used[1]) : Number.NaN,
      internals: internals(locks),
    };
  };

  try {
    const perChunk = Math.ceil(cycles / checkpoints);
    for (let chunk = 0; chunk < checkpoints; chunk++) {
      ctx.progress.step(
        `G: soak ${done.toLocaleString('en-US')}/${cycles.toLocaleString('en-US')} cycles`,
      );
      const target = Math.min(cycles, done + perChunk);
      const startedAt = performance.now();
      await Promise.all(
        Array.from({ length: loops }, async (_, loop) => {
          const key = `bench:G:${loop % keys}`;
          while (done < target) {
            try {
              const handle = await locks.acquire(key);
              await handle.release();
              done += 1;
            } catch {
              failures += 1;
              if (failures > 1_000)
                throw new Error('over 1,000 failed acquisitions');
            }
          }
        }),
      );
      measuredMs += performance.now() - startedAt;
      snapshots.push(await snapshot());
    }
  } catch (e) {
    error = errorText(e);
    ctx.progress.log(`G failed: ${error}`);
  } finally {
    await app.close();
    await ctx.admin.flushall();
  }

  const first = snapshots[0];
  const last = snapshots.at(-1);
  const grew: string[] = [];
  let heapGrowthBytes = Number.NaN;
  let heapSlopePer100k = Number.NaN;
  if (first && last && snapshots.length > 1) {
    heapGrowthBytes = last.heapUsedBytes - first.heapUsedBytes;
    heapSlopePer100k =
      slope(
        snapshots.map((s) => s.cycles),
        snapshots.map((s) => s.heapUsedBytes),
      ) * 100_000;
    if (heapGrowthBytes > heapToleranceBytes) grew.push('heap');
    const counted = [
      'listeners',
      'handles',
      'timers',
      'redisConnections',
      'redisSubscriptions',
      'redisKeys',
    ] as const;
    for (const name of counted) {
      if ((last[name] ?? 0) > (first[name] ?? 0)) grew.push(name);
    }
    for (const [name, size] of Object.entries(last.internals)) {
      if (size > (first.internals[name] ?? 0)) grew.push(`internal ${name}`);
    }
  }
  return {
    cycles: done,
    loops,
    keys,
    cyclesPerSec: measuredMs > 0 ? (done * 1000) / measuredMs : Number.NaN,
    gcExposed,
    snapshots,
    heapGrowthBytes,
    heapSlopePer100k,
    grew,
    failures,
    error,
  };
}

/**
 * The service's active holds (a private set) and the backend's own
 * bookkeeping sizes (RedisLockBackend.bookkeeping: waiters, holds, timers,
 * calls under way, connection listeners).
 */
function internals(locks: LockService): Record<string, number> {
  const sizes: Record<string, number> = {};
  const active = (locks as unknown as { active?: Set<unknown> }).active;
  if (active) sizes['service.active'] = active.size;
  const backend = (locks as unknown as { settings?: { backend?: unknown } })
    .settings?.backend;
  if (backend instanceof RedisLockBackend) {
    for (const [name, size] of Object.entries(backend.bookkeeping()))
      sizes[`backend.${name}`] = size;
  }
  return sizes;
}

import { nowMs } from '../clock.js';
import {
  analyzeContention,
  type ContentionFigures,
} from '../scenarios/contention-analysis.js';
import type {
  ContentionEvents,
  ContentionSpec,
} from '../scenarios/contention-core.js';
import type { Stalls } from '../scenarios/stall-watch.js';
import { WorkerPool } from '../workers/pool.js';
import { probeArguments } from './cycles.js';

const probeWindowMs = 2_000;

/**
 * A probe window's figures, with each process's stalls when it watched them
 * and what each process saw (its events, wake-ups included when it watched
 * hand-offs), by process.
 */
export type ProbeWindowFigures = ContentionFigures & {
  readonly stalls: readonly Stalls[];
  readonly parts: readonly ContentionEvents[];
};

/**
 * One window of C's shape for the probes: `perProcess` loops in each of the
 * pool's `processes` worker processes on `key`, holding `holdMs`, the
 * contender opened fresh for the window (as C's windows do) and closed after.
 * With `watchStalls`, each process records its event-loop delay and GC
 * pauses over the window; with `watchHandoffs`, the wake-ups it read (this
 * library's contenders only).
 */
export async function probeWindow(
  pool: WorkerPool,
  id: string,
  url: string,
  shape: {
    readonly key: string;
    readonly processes: number;
    readonly perProcess: number;
    readonly holdMs: number;
    readonly watchStalls?: boolean;
    readonly watchHandoffs?: boolean;
  },
): Promise<ProbeWindowFigures> {
  const { key, processes, perProcess, holdMs, watchStalls, watchHandoffs } =
    shape;
  await pool.open(id, [url], processes);
  try {
    const startAt = nowMs() + 100;
    const specs = Array.from(
      { length: processes },
      (_spec, w): ContentionSpec => ({
        key,
        who: Array.from({ length: perProcess }, (_, i) => w * perProcess + i),
        holdMs,
        startAt,
        windowMs: probeWindowMs,
        ttlMs: 10_000,
        drainMs: 5_000,
        watchStalls,
        ...(watchHandoffs ? { watchHandoffsAt: url } : {}),
      }),
    );
    const parts = await pool.run(specs);
    return {
      ...analyzeContention(
        parts,
        processes * perProcess,
        startAt,
        probeWindowMs,
      ),
      stalls: parts.flatMap((part) => (part.stalls ? [part.stalls] : [])),
      parts,
    };
  } finally {
    await pool.close();
  }
}

/**
 * `rounds` rounds in which each contender of `ids` runs `window` once, in a
 * worker pool of its own (`processes` workers started with `nodeFlags`),
 * the contenders in turn and their order reversed every other round, so
 * none always follows another. The pools start before the first round and
 * stop after the last, or when a window fails.
 */
export async function windowsInTurn(
  ids: readonly string[],
  workers: { readonly processes: number; readonly nodeFlags?: string[] },
  rounds: number,
  window: (pool: WorkerPool, id: string, round: number) => Promise<void>,
): Promise<void> {
  const pools = new Map(
    ids.map((id) => [id, new WorkerPool(workers.processes, workers.nodeFlags)]),
  );
  try {
    await Promise.all([...pools.values()].map((pool) => pool.ready()));
    for (let round = 0; round < rounds; round++) {
      for (const id of round % 2 === 0 ? ids : ids.toReversed())
        await window(pools.get(id)!, id, round);
    }
  } finally {
    await Promise.all([...pools.values()].map((pool) => pool.stop()));
  }
}

/**
 * The probes of C's windows (tail-windows, handoff-times): the contenders
 * named on the command line, WINDOWS (default 20) measured windows each in
 * turn after two unmeasured ones (fresh processes start slow), PROCESSES
 * worker processes with 16 / PROCESSES loops each, HOLD_MS (default 0),
 * every process watching its stalls. `measured` gets each measured window,
 * numbered from 0. Resolves with the contenders' ids once all have run.
 */
export async function cWindowsInTurn(
  probe: string,
  shape: {
    readonly defaultProcesses: number;
    /** Each window's key is `<keyPrefix><id>:<round>`. */
    readonly keyPrefix: string;
    readonly watchHandoffs?: boolean;
  },
  measured: (id: string, n: number, window: ProbeWindowFigures) => void,
): Promise<readonly string[]> {
  const { url, ids } = probeArguments(probe);
  const processes = Number(process.env.PROCESSES ?? shape.defaultProcesses);
  const holdMs = Number(process.env.HOLD_MS ?? 0);
  const windows = Number(process.env.WINDOWS ?? 20);
  const unmeasured = 2;
  await windowsInTurn(
    ids,
    { processes },
    unmeasured + windows,
    async (pool, id, round) => {
      const window = await probeWindow(pool, id, url, {
        key: `${shape.keyPrefix}${id}:${round}`,
        processes,
        perProcess: 16 / processes,
        holdMs,
        watchStalls: true,
        watchHandoffs: shape.watchHandoffs,
      });
      if (round >= unmeasured) measured(id, round - unmeasured, window);
    },
  );
  return ids;
}

import { execFileSync, spawnSync } from 'node:child_process';
import os from 'node:os';
import type { NamedWorkers } from './workers/pool.js';

/**
 * Where A's processes run: the Redis server on the first CPU, the worker
 * processes that take turns on the others, as a Redis server on a host of
 * its own and its clients on theirs. A measures sequential round trips, and
 * left to the scheduler on a 2-CPU VM a client process sometimes shares a
 * CPU with Redis and sometimes not, a placement that sticks to the process
 * for a while and moves a round trip between about 22 and 50 µs: one
 * contender's per-repetition ratios to raw spread over 0.80-1.29, and over
 * 0.90-1.05 placed (A-only runs, this EPYC, 15 repetitions). B is left to
 * the scheduler: each of its two sides keeps a CPU busy, and placed on one
 * CPU with V8's helper threads its ratios spread wider than unplaced.
 */
export interface Placement {
  /** CPU list (taskset syntax) of the Redis server. */
  readonly serverCpus: string;
  /** CPU list of the worker processes. */
  readonly clientCpus: string;
}

/** Why A's processes were left to the scheduler. */
export interface Unplaced {
  readonly unplaced: string;
}

/**
 * A's placement on this machine: needs 2 CPUs and `taskset` (util-linux);
 * `BENCH_PLACE=0` leaves A to the scheduler too.
 */
export function roundTripPlacement(): Placement | Unplaced {
  const cpus = os.availableParallelism();
  if (process.env.BENCH_PLACE === '0') return { unplaced: 'BENCH_PLACE=0' };
  if (cpus < 2) return { unplaced: `${cpus} CPU` };
  if (spawnSync('taskset', ['-V']).status !== 0)
    return { unplaced: 'taskset not found' };
  return { serverCpus: '0', clientCpus: cpus === 2 ? '1' : `1-${cpus - 1}` };
}

/** Every CPU of the machine, to give a placed process back to the scheduler. */
export function allCpus(): string {
  return `0-${os.availableParallelism() - 1}`;
}

/** Sets the CPUs of every thread of process `pid` (a process gone already is skipped). */
export function placeProcess(pid: number | undefined, cpus: string): void {
  if (pid === undefined) return;
  try {
    execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], {
      stdio: 'ignore',
    });
  } catch {
    // It exited meanwhile: nothing to place.
  }
}

/**
 * Runs A with its processes placed (see {@link Placement}), then gives the
 * Redis server and the workers back to the scheduler; the result says where
 * they ran.
 */
export async function withRoundTripPlacement<T extends object>(
  serverPid: number | undefined,
  workers: NamedWorkers,
  run: () => Promise<T>,
): Promise<T & { readonly placement: Placement | Unplaced }> {
  const placement = roundTripPlacement();
  if ('unplaced' in placement) return { ...(await run()), placement };
  placeProcess(serverPid, placement.serverCpus);
  workers.placeOn(placement.clientCpus);
  try {
    return { ...(await run()), placement };
  } finally {
    placeProcess(serverPid, allCpus());
    workers.unplace();
  }
}

import { performance } from 'node:perf_hooks';

/**
 * Wall-clock milliseconds with sub-millisecond resolution, comparable across
 * processes on this machine: every process adds its own high-resolution
 * monotonic clock to the moment it started.
 */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Sleeps until the shared clock reaches `at` (ms), in one timer plus a short spin. */
export async function sleepUntil(at: number): Promise<void> {
  const left = at - nowMs();
  if (left > 2) await sleep(left - 1);
  while (nowMs() < at) await new Promise((resolve) => setImmediate(resolve));
}

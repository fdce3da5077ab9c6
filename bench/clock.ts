/**
 * Milliseconds on the machine's monotonic clock (`CLOCK_MONOTONIC`, read by
 * `process.hrtime`), with sub-millisecond resolution: one clock for every
 * process on this machine, so C, I and J can compare stamps taken in
 * different workers. It counts from boot, not from the epoch.
 *
 * `performance.timeOrigin + performance.now()` was used before: each
 * process adds its own monotonic time to a wall-clock reading taken when it
 * started, and on this VM processes started a second apart disagreed by up
 * to a millisecond that way, more than a hand-off takes and far more than
 * the 50 µs the overlap checks allow.
 */
export function nowMs(): number {
  const [seconds, nanoseconds] = process.hrtime();
  return seconds * 1e3 + nanoseconds / 1e6;
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Sleeps until the shared clock reaches `at` (ms), in one timer plus a short spin. */
export async function sleepUntil(at: number): Promise<void> {
  const left = at - nowMs();
  if (left > 2) await sleep(left - 1);
  while (nowMs() < at) await new Promise((resolve) => setImmediate(resolve));
}

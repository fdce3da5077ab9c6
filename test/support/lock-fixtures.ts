import { Redis } from 'ioredis';
export { openLocks as createLockService } from './lock-clients.js';

export const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `condition` every 5 ms until it holds or `timeoutMs` passes. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(5);
  }
}

/** Whether `promise` has settled yet, asked at any time. */
export function settledFlag(promise: Promise<unknown>): () => boolean {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return () => settled;
}

/**
 * Keeps this process busy, as a long GC pause or a CPU-bound handler would
 * (nothing is read off the sockets meanwhile), for at least `ms` and on
 * until `done()` holds, for at most `maxMs`: a test that must know something
 * happened outside while this process was stalled (an answer arrived) does
 * not leave that to how soon a busy machine schedules the other process.
 * Returns how long it blocked; throws when `done()` did not hold within
 * `maxMs`, naming what it was `waitingFor`.
 */
export function blockEventLoopUntil(
  ms: number,
  done: () => boolean,
  maxMs: number,
  waitingFor = 'the condition',
): number {
  const startedAt = performance.now();
  for (;;) {
    const blocked = performance.now() - startedAt;
    if (blocked >= ms && done()) return blocked;
    if (blocked >= maxMs)
      throw new Error(
        `blocked ${Math.round(blocked)} ms and still waiting for ${waitingFor}`,
      );
  }
}

/**
 * Holds every client of the Redis at `url` for `ms` (`CLIENT PAUSE ms
 * ALL`): their commands wait and then run in order. Resolves once the pause
 * is set.
 */
export async function pauseRedis(url: string, ms: number): Promise<void> {
  const admin = new Redis(url);
  try {
    await admin.call('CLIENT', 'PAUSE', String(ms), 'ALL');
  } finally {
    admin.disconnect();
  }
}

import type { ContenderInstance } from '../contenders/types.js';

/** A probe's keys: `count` of them under `prefix`, taken in turn. */
export function rotatingKeys(prefix: string, count = 1000): () => string {
  const keys = Array.from({ length: count }, (_, i) => `${prefix}:${i}`);
  let next = 0;
  return () => keys[next++ % keys.length]!;
}

/**
 * `n` sequential acquire + release cycles of `lock` on `nextKey()`'s keys,
 * with a 10 s lease: µs per cycle, and the process's CPU µs per cycle.
 */
export async function sequentialCycles(
  lock: ContenderInstance,
  nextKey: () => string,
  n: number,
): Promise<{ us: number; cpuUs: number }> {
  const start = performance.now();
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const held = await lock.acquire(nextKey(), { ttlMs: 10_000 });
    await held.release();
  }
  const used = process.cpuUsage(cpu);
  return {
    us: ((performance.now() - start) * 1000) / n,
    cpuUs: (used.user + used.system) / n,
  };
}

/**
 * B's load: `loops` concurrent loops, each acquiring and releasing its own
 * key under `prefix` with a 10 s lease, until `keepGoing()` says stop (each
 * loop then ends the cycle it is in). Counts cycles into `tally.cycles`.
 */
export async function concurrentLoops(
  lock: ContenderInstance,
  prefix: string,
  loops: number,
  keepGoing: () => boolean,
  tally: { cycles: number },
): Promise<void> {
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      const key = `${prefix}:${loop}`;
      while (keepGoing()) {
        const held = await lock.acquire(key, { ttlMs: 10_000 });
        await held.release();
        tally.cycles++;
      }
    }),
  );
}

/**
 * A probe's command line: the contender ids it was given, and the Redis it
 * runs against (REDIS_URL, default redis://127.0.0.1:6379). Exits with a
 * usage line naming `probe` when no id is given.
 */
export function probeArguments(probe: string): {
  url: string;
  ids: string[];
} {
  const ids = process.argv.slice(2);
  if (ids.length === 0) {
    process.stderr.write(`usage: ${probe} <contender id>...\n`);
    process.exit(2);
  }
  return { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', ids };
}

import type { Redis } from 'ioredis';
import type { RedisServerHandle } from '../../test/support/redis-server.js';
import type { BenchConfig } from '../config.js';
import type { Progress } from '../progress.js';

/** What every scenario gets from the runner. */
export interface BenchContext {
  readonly config: BenchConfig;
  readonly progress: Progress;
  /** The private server for the single-node scenarios. */
  readonly server: RedisServerHandle;
  /** An admin connection to it (FLUSHALL between slices, CLIENT LIST, INFO). */
  readonly admin: Redis;
  /** Starts `count` more private servers (stopped by the runner at the end). */
  startServers(count: number): Promise<RedisServerHandle[]>;
}

/**
 * The order of contenders in repetition `rep`: rotated by one each time, so
 * that no contender always runs first (cold) or right after a heavy one.
 */
export function rotation<T>(items: readonly T[], rep: number): T[] {
  const shift = rep % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/**
 * The worker process that runs `each` in the group of contender `id`, where
 * `shared` are the sides that take turns in more than one group (the
 * scenario's baseline, and in A and B the contender a row is compared
 * with). Those get one process per group: a process shared by several
 * groups would run in more turns than its partners, and on this VM a
 * process's recent history (how long it slept, where it last ran) changes
 * its round trips more than the code does.
 */
export function workerBeside(
  each: string,
  id: string,
  ...shared: (string | undefined)[]
): string {
  return shared.includes(each) ? `${each} beside ${id}` : each;
}

/** Runs `fn` bounded by `ms`; rejects with a clear message when it takes longer. */
export async function withTimeout<T>(
  work: Promise<T>,
  ms: number,
  what: string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${what} did not finish within ${ms} ms`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A short, single-line description of an error for the report. */
export function errorText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0].slice(0, 200);
}

/**
 * What follows an error message's first line (a child process's last lines,
 * say), at most its last `maxLines` non-empty lines; undefined when there is
 * none. For a failure's cause, which {@link errorText} leaves out.
 */
export function errorDetail(error: unknown, maxLines = 30): string | undefined {
  const message = error instanceof Error ? error.message : String(error);
  const rest = message
    .split('\n')
    .slice(1)
    .filter((line) => line.trim() !== '')
    .slice(-maxLines)
    .map((line) => line.slice(0, 300));
  return rest.length > 0 ? rest.join('\n') : undefined;
}

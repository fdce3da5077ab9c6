import { setTimeout as sleep } from 'node:timers/promises';

import { Redis } from 'ioredis';

/**
 * One-off admin commands and polling for the helpers that set up several
 * Redis processes (cluster, Sentinel): each command on a fresh connection
 * that fails at once instead of retrying, so a dead or frozen node is an
 * error, not a hang.
 */

/** A command argument. */
export type AdminArg = string | number | Buffer;

/** Runs one command on `127.0.0.1:port` and resolves with its reply. */
export function adminCall(
  port: number,
  ...args: [string, ...AdminArg[]]
): Promise<unknown> {
  return withClient(port, (redis) => redis.call(...args));
}

/** {@link adminCall} with the reply's strings as Buffers. */
export function adminCallBuffer(
  port: number,
  ...args: [string, ...AdminArg[]]
): Promise<unknown> {
  return withClient(port, (redis) => redis.callBuffer(...args));
}

/** The value of `name` in an INFO reply. */
export function infoField(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*?)\r?$`, 'm').exec(info)?.[1];
}

/**
 * Polls `condition` every 50 ms until it resolves true. Errors it throws
 * count as false (a node may be down meanwhile).
 *
 * @throws Error naming `what` (with the last error as cause) after `timeoutMs`.
 */
export async function waitUntil(
  what: string,
  timeoutMs: number,
  condition: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await condition()) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`, {
        cause: lastError,
      });
    }
    await sleep(50);
  }
}

async function withClient<T>(
  port: number,
  use: (redis: Redis) => Promise<T>,
): Promise<T> {
  const redis = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1_000,
    commandTimeout: 5_000,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

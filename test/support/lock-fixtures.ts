import { Redis } from 'ioredis';
// Straight from the source files, not the package index: the index pulls in
// the Nest module, decorator and interceptor, which costs child processes
// (workers/) about half a second of start-up each.
import { RedisLockBackend } from '../../libs/distributed-lock/src/backends/redis/redis-lock-backend.js';
import {
  LockService,
  type LockServiceSettings,
} from '../../libs/distributed-lock/src/lock-service/lock.service.js';

export const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A LockService on its own connection to `url`, closed by `close()`. */
export function createLockService(
  url: string,
  settings: Partial<Omit<LockServiceSettings, 'backend'>> & {
    commandTimeoutMs?: number;
    handoffLeaseMs?: number;
  } = {},
): { locks: LockService; client: Redis; close: () => Promise<void> } {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  const backend = new RedisLockBackend({
    client,
    ownsClient: true,
    commandTimeoutMs: settings.commandTimeoutMs,
    handoffLeaseMs: settings.handoffLeaseMs,
  });
  const locks = new LockService({
    backend,
    keyPrefix: settings.keyPrefix ?? 'lock:',
    leaseTime: settings.leaseTime,
    watchdogLeaseTime: settings.watchdogLeaseTime ?? 30_000,
    waitTime: settings.waitTime ?? 5_000,
    maxKeyLength: settings.maxKeyLength ?? 512,
  });
  return { locks, client, close: () => locks.close() };
}

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

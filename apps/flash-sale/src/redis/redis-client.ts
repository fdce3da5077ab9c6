import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';

/** Injection token of the app's ioredis client. */
export const REDIS_CLIENT = Symbol('REDIS_CLIENT');

/**
 * The app's Redis connection. Every command is bounded by `timeout`, and a
 * command issued while Redis is away fails after one retry instead of waiting
 * for a reconnect: requests get a 503, never a hang. The client keeps
 * reconnecting in the background.
 */
export function createRedisClient(url: string, timeout: number): Redis {
  const client = new Redis(url, {
    connectTimeout: timeout,
    commandTimeout: timeout,
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
    lazyConnect: true,
  });
  const logger = new Logger('Redis');
  let lastError = '';
  client.on('error', (error: Error) => {
    // ioredis reports every failed reconnect: say each distinct error once.
    if (error.message !== lastError) logger.warn(error.message);
    lastError = error.message;
  });
  client.on('ready', () => {
    if (lastError) logger.log('Reconnected');
    lastError = '';
  });
  return client;
}

/** PINGs `url` on a throwaway connection; resolves the error, or undefined when Redis answered. */
export async function pingRedis(
  url: string,
  timeoutMs: number,
): Promise<Error | undefined> {
  const probe = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.ping();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  } finally {
    probe.disconnect();
  }
}

import { Logger } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import type { AppConfig, RedisAddress } from '../config/app-config.js';

/** Injection token of the app's ioredis client. */
export const REDIS_CLIENT = Symbol('REDIS_CLIENT');

/**
 * The app's client: one Redis server (by URL, or the master behind Sentinel)
 * or a Redis Cluster. Keys used together share a hash tag (see stock-cache.ts).
 */
export type RedisClient = Redis | Cluster;

const reconnectDelay = (attempt: number) => Math.min(attempt * 100, 1_000);

/**
 * The app's Redis connection. Every command is bounded by `timeout`, and a
 * command issued while Redis is away fails after one retry instead of waiting
 * for a reconnect: requests get a 503, never a hang. The client keeps
 * reconnecting in the background.
 */
export function createRedisClient(url: string, timeout: number): Redis {
  return logErrors(new Redis(url, connectionOptions(timeout)));
}

/** The same for the master named `name` by the Sentinels (`new Redis({ sentinels, name })`). */
export function createSentinelClient(
  sentinel: NonNullable<AppConfig['redisSentinel']>,
  timeout: number,
): Redis {
  return logErrors(
    new Redis({
      sentinels: sentinel.sentinels.map(({ host, port }) => ({ host, port })),
      name: sentinel.name,
      ...connectionOptions(timeout),
    }),
  );
}

/**
 * The same for a Redis Cluster. The timeouts apply to each node's connection;
 * while no node is reachable at all, commands wait for the cluster to come
 * back (the lock calls are bounded on their own).
 */
export function createClusterClient(
  nodes: readonly RedisAddress[],
  timeout: number,
): Cluster {
  const { retryStrategy, lazyConnect, ...perNode } = connectionOptions(timeout);
  return logErrors(
    new Cluster(
      nodes.map(({ host, port }) => ({ host, port })),
      {
        lazyConnect,
        clusterRetryStrategy: retryStrategy,
        slotsRefreshTimeout: timeout,
        redisOptions: perNode,
      },
    ),
  );
}

function connectionOptions(timeout: number) {
  return {
    connectTimeout: timeout,
    commandTimeout: timeout,
    maxRetriesPerRequest: 1,
    retryStrategy: reconnectDelay,
    lazyConnect: true,
  };
}

function logErrors<T extends RedisClient>(client: T): T {
  const logger = new Logger('Redis');
  let lastError = '';
  client.on('error', (error: Error) => {
    // ioredis reports every failed reconnect: say each distinct error once
    // (ignoring numbers: Sentinel's retry messages count up the delay).
    const kind = error.message.replace(/\d+/g, '#');
    if (kind !== lastError) logger.warn(error.message);
    lastError = kind;
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

import type { LoggerService } from '@nestjs/common';
import { DEFAULT_REDIS_URL, type AppConfig } from '../config/app-config.js';
import { redactUrl } from '../common/redact-url.js';
import { pingRedis } from './redis-client.js';
import {
  findRedisServerBinary,
  startOrReuseLocalRedis,
} from './local-redis-server.js';

export interface ResolvedRedis {
  readonly url: string;
  /** Stops the local fallback server if this process started it. */
  close(): Promise<void>;
}

const noop = () => Promise.resolve();

const HOW_TO_GET_REDIS =
  'Start Redis (for example `apt-get install -y redis-server && redis-server --daemonize yes`, ' +
  'or `docker run -p 6379:6379 redis`), or set REDIS_URL=redis://host:port.';

/**
 * Finds the Redis to use, failing fast with instructions when there is none:
 * `REDIS_URL` when set (it must answer); else `redis://127.0.0.1:6379` when it
 * answers; else, when `redis-server` is installed, a local fallback server
 * shared by the instances on this machine.
 */
export async function resolveRedis(
  config: AppConfig,
  logger: LoggerService,
  defaultUrl = DEFAULT_REDIS_URL,
): Promise<ResolvedRedis> {
  const timeout = Math.max(config.backendTimeout, 1_000);
  if (config.redisUrl !== undefined) {
    const error = await pingRedis(config.redisUrl, timeout);
    if (error) {
      throw new Error(
        `Redis at ${redactUrl(config.redisUrl)} (REDIS_URL) does not answer: ${error.message}. ${HOW_TO_GET_REDIS}`,
      );
    }
    return { url: config.redisUrl, close: noop };
  }
  const error = await pingRedis(defaultUrl, timeout);
  if (error === undefined) return { url: defaultUrl, close: noop };
  const binary = config.localRedis.enabled
    ? findRedisServerBinary()
    : undefined;
  if (binary === undefined) {
    throw new Error(
      `No Redis answers at ${defaultUrl} (${error.message}) and REDIS_URL is not set` +
        (config.localRedis.enabled
          ? ' (no redis-server binary found to start one). '
          : ' (LOCAL_REDIS=0). ') +
        HOW_TO_GET_REDIS,
    );
  }
  const local = await startOrReuseLocalRedis(binary, config.localRedis.port);
  logger.log(
    local.started
      ? `No Redis at ${defaultUrl}: started a local redis-server (${binary}, no persistence) at ${local.url}; it stops with this instance. Set REDIS_URL to use your own.`
      : `No Redis at ${defaultUrl}: using the local redis-server another instance started at ${local.url}`,
  );
  return { url: local.url, close: () => local.stop() };
}

import type { LoggerService } from '@nestjs/common';
import {
  ConfigError,
  DEFAULT_REDIS_URL,
  type AppConfig,
  type RedisAddress,
} from '../config/app-config.js';
import { redactUrl } from '../common/redact-url.js';
import {
  createClusterClient,
  createRedisClient,
  createSentinelClient,
  pingRedis,
  type RedisClient,
} from './redis-client.js';
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

/** The app's connected Redis client and how to close it. */
export interface OpenedRedis {
  readonly client: RedisClient;
  /** Closes the client, then stops the local fallback server if this process started it. */
  close(): Promise<void>;
}

/**
 * Connects the app's client to the deployment the configuration names:
 * `REDIS_CLUSTER_NODES` (a Redis Cluster), else `REDIS_SENTINELS` (the master
 * named by Sentinel), else the single server {@link resolveRedis} finds.
 * Fails fast, naming the variable, when it does not answer.
 */
export async function openRedis(
  config: AppConfig,
  logger: LoggerService,
): Promise<OpenedRedis> {
  const { redisCluster, redisSentinel } = config;
  if (redisCluster && redisSentinel) {
    throw new ConfigError(
      'Set either a Redis Cluster (REDIS_CLUSTER_NODES) or Sentinels (REDIS_SENTINELS), not both',
    );
  }
  if (!redisCluster && !redisSentinel) {
    const target = await resolveRedis(config, logger);
    const client = createRedisClient(target.url, config.backendTimeout);
    try {
      await client.connect();
    } catch (error) {
      client.disconnect();
      await target.close();
      throw error;
    }
    return {
      client,
      close: async () => {
        await quit(client);
        await target.close();
      },
    };
  }
  if (config.redisUrl !== undefined) {
    logger.warn?.(
      `REDIS_URL is ignored: ${redisCluster ? 'REDIS_CLUSTER_NODES' : 'REDIS_SENTINELS'} is set`,
    );
  }
  const [client, label] = redisCluster
    ? [
        createClusterClient(redisCluster, config.backendTimeout),
        `Redis Cluster at ${list(redisCluster)} (REDIS_CLUSTER_NODES)`,
      ]
    : [
        createSentinelClient(redisSentinel!, config.backendTimeout),
        `Redis master "${redisSentinel!.name}" of the Sentinels at ${list(redisSentinel!.sentinels)} (REDIS_SENTINELS)`,
      ];
  await connectOrExplain(
    client,
    label,
    Math.max(config.backendTimeout * 2, 5_000),
  );
  logger.log(`Using the ${label}`);
  return { client, close: () => quit(client) };
}

/**
 * Connects and PINGs, failing at the first connection error (like the probe
 * of a single server) or after `timeoutMs`: then disconnects and throws
 * saying what did not answer and why.
 */
async function connectOrExplain(
  client: RedisClient,
  label: string,
  timeoutMs: number,
): Promise<void> {
  let onError: ((error: Error) => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const failure = new Promise<never>((_, reject) => {
    onError = reject;
    client.once('error', reject);
    timer = setTimeout(
      () => reject(new Error(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    await Promise.race([client.connect().then(() => client.ping()), failure]);
  } catch (error) {
    client.disconnect();
    throw new Error(
      `The ${label} does not answer: ${describe(error as Error)}`,
      { cause: error },
    );
  } finally {
    clearTimeout(timer);
    if (onError) client.off('error', onError);
  }
}

/** An ioredis connection error, with the cluster node's own reason when it has one. */
function describe(error: Error): string {
  // Sentinel's message says when it will retry, which startup does not.
  const message = error.message.replace(
    / Retrying from scratch after \d+ms\./,
    '',
  );
  const cause = (error as { lastNodeError?: Error }).lastNodeError;
  return cause ? `${message} (${cause.message})` : message;
}

async function quit(client: RedisClient): Promise<void> {
  await client.quit().catch(() => client.disconnect());
}

function list(addresses: readonly RedisAddress[]): string {
  return addresses
    .map(({ host, port }) =>
      host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`,
    )
    .join(',');
}

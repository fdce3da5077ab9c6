import {
  Logger,
  Module,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule } from '@nestjs/core';
import { Cluster, Redis, type ClusterNode } from 'ioredis';
import type { LockBackend } from '../backends/lock-backend.js';
import { warnIfLocksCanBeEvicted } from '../backends/redis/eviction-policy-check.js';
import { warnIfRedisTooOld } from '../backends/redis/redis-version-check.js';
import { RedisLockBackend } from '../backends/redis/redis-lock-backend.js';
import { coalesceWrites } from '../backends/redis/write-coalescing.js';
import { QuorumLockBackend } from '../backends/quorum/quorum-lock-backend.js';
import { LockHealthIndicator } from '../health/lock-health.indicator.js';
import { DistributedLockInterceptor } from '../interceptor/distributed-lock.interceptor.js';
import {
  LockService,
  type LockServiceSettings,
} from '../lock-service/lock.service.js';
import { loadTelemetry, type Telemetry } from '../telemetry/load-telemetry.js';
import { observedBackend } from '../telemetry/observed-backend.js';
import {
  createSemaphoreService,
  shareRedisWithSemaphores,
} from '../semaphore/semaphore-wiring.js';
import { SemaphoreService } from '../semaphore/semaphore.service.js';
import { createReadWriteLockService } from '../rwlock/rwlock-wiring.js';
import { ReadWriteLockService } from '../rwlock/read-write-lock.service.js';
import { LockExplorer } from './lock-explorer.js';
import {
  ConfigurableModuleClass,
  DISTRIBUTED_LOCK_OPTIONS,
} from './distributed-lock.module-definition.js';
import type { DistributedLockModuleOptions } from './distributed-lock.options.js';
import {
  lockOptionDefaults,
  resolveLockOptions,
  type ResolvedLockOptions,
} from './resolve-lock-options.js';

/**
 * Distributed locks on Redis for a Nest application.
 *
 * ```ts
 * DistributedLockModule.forRoot({ redis: process.env.REDIS_URL, isGlobal: true })
 * ```
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: LockService,
      inject: [DISTRIBUTED_LOCK_OPTIONS],
      useFactory: async (options: DistributedLockModuleOptions) =>
        createLockService(options, await loadTelemetry(options)),
    },
    LockExplorer,
    { provide: APP_INTERCEPTOR, useClass: DistributedLockInterceptor },
    LockHealthIndicator,
    {
      provide: SemaphoreService,
      inject: [DISTRIBUTED_LOCK_OPTIONS, LockService],
      useFactory: createSemaphoreService,
    },
    {
      provide: ReadWriteLockService,
      inject: [DISTRIBUTED_LOCK_OPTIONS, LockService],
      useFactory: createReadWriteLockService,
    },
  ],
  exports: [
    LockService,
    LockHealthIndicator,
    SemaphoreService,
    ReadWriteLockService,
  ],
})
export class DistributedLockModule extends ConfigurableModuleClass {}

/** The Redis connection of a backend the module built, checked at startup. */
interface ModuleRedis {
  readonly client: Redis | Cluster;
  readonly commandTimeout: number;
}

/**
 * A LockService that closes its backend (and any connection it opened) on
 * shutdown, and warns at startup when Redis may evict lock keys.
 */
class ManagedLockService
  extends LockService
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly shutdown = new AbortController();

  constructor(
    settings: LockServiceSettings,
    private readonly redis?: ModuleRedis,
  ) {
    super(settings);
  }

  onApplicationBootstrap(): void {
    if (!this.redis) return;
    const { client, commandTimeout } = this.redis;
    const logger = new Logger('DistributedLock');
    const options = { timeoutMs: commandTimeout, signal: this.shutdown.signal };
    // Not awaited: the checks must not hold up startup, and never fail. The
    // version is read once the eviction check found the client ready.
    void warnIfLocksCanBeEvicted(client, logger, options).then(() =>
      warnIfRedisTooOld(client, logger, options),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.shutdown.abort();
    await this.close();
  }
}

function createLockService(
  options: DistributedLockModuleOptions,
  telemetry: Telemetry,
): LockService {
  const resolved = resolveLockOptions(options);
  let backend = options.backend;
  let redis: ModuleRedis | undefined;
  if (!backend && options.nodes) {
    backend = createQuorumBackend(options.nodes, resolved);
  } else if (!backend) {
    const built = createRedisBackend(options, resolved);
    backend = built.backend;
    redis = { client: built.client, commandTimeout: resolved.commandTimeout };
  }
  if (telemetry.backend) backend = observedBackend(backend, telemetry.backend);
  const service = new ManagedLockService(
    {
      backend,
      observer: telemetry.service,
      keyPrefix: resolved.keyPrefix,
      leaseTime: resolved.leaseTime,
      watchdogLeaseTime: resolved.watchdogLeaseTime,
      sessionTtl: resolved.sessionTtl,
      waitTime: resolved.waitTime,
      maxKeyLength: resolved.maxKeyLength,
    },
    redis,
  );
  // Semaphores and read-write locks run on the same connection (see
  // semaphore-wiring.ts).
  if (redis) shareRedisWithSemaphores(service, redis.client);
  return service;
}

function createRedisBackend(
  options: DistributedLockModuleOptions,
  resolved: ResolvedLockOptions,
): { backend: LockBackend; client: Redis | Cluster } {
  const { redis, cluster } = options;
  const backendOptions = {
    commandTimeoutMs: resolved.commandTimeout,
    handoffLeaseMs: resolved.handoffLeaseTime,
    localHandoffs: resolved.localHandoffs,
    localHandoffWindowMs: resolved.localHandoffWindow,
    keyPrefix: resolved.keyPrefix,
    replicaAcks: options.replicaAcks,
    freeOnDisconnect: options.freeOnDisconnect,
  };
  const given = cluster instanceof Cluster ? cluster : redis;
  if (isRedisClient(given)) {
    const backend = new RedisLockBackend({
      client: given,
      ownsClient: false,
      ...backendOptions,
    });
    return { backend, client: given };
  }
  const settings = redis as Exclude<typeof redis, Redis>;
  const connection = {
    // Fail a command quickly when Redis is away instead of retrying it for long;
    // every lock call is also bounded by `commandTimeout`.
    maxRetriesPerRequest: 1,
    connectTimeout: resolved.commandTimeout,
  };
  let client: Redis | Cluster;
  if (cluster) {
    client = new Cluster([...(cluster as readonly ClusterNode[])], {
      ...options.clusterOptions,
      redisOptions: { ...connection, ...options.clusterOptions?.redisOptions },
    });
  } else if (settings === undefined || typeof settings === 'string') {
    client = new Redis(settings ?? lockOptionDefaults.redisUrl, connection);
  } else {
    const { url, ...rest } = settings;
    client = url
      ? new Redis(url, { ...connection, ...rest })
      : new Redis({ ...connection, ...rest });
  }
  if (resolved.coalesceWrites) coalesceWrites(client);
  const logger = new Logger('DistributedLock');
  let lastError = '';
  client.on('error', (error: Error) => {
    // ioredis reports every failed reconnect; say it once per distinct error.
    if (error.message !== lastError) logger.warn(`Redis: ${error.message}`);
    lastError = error.message;
  });
  client.on('ready', () => {
    lastError = '';
  });
  const backend = new RedisLockBackend({
    client,
    ownsClient: true,
    ...backendOptions,
  });
  return { backend, client };
}

/** A Redlock backend over `nodes`; it closes the connections it opened here. */
function createQuorumBackend(
  nodes: NonNullable<DistributedLockModuleOptions['nodes']>,
  resolved: ResolvedLockOptions,
): LockBackend {
  const connection = {
    maxRetriesPerRequest: 1,
    connectTimeout: resolved.commandTimeout,
  };
  const logger = new Logger('DistributedLock');
  const opened = nodes.map((node) => !isRedisClient(node));
  const clients = nodes.map((node) => {
    if (isRedisClient(node)) return node as Redis;
    const client =
      typeof node === 'string'
        ? new Redis(node, connection)
        : new Redis({ ...connection, ...node });
    // A round gives each node's idle connection one command: it leaves at once.
    if (resolved.coalesceWrites) coalesceWrites(client);
    let lastError = '';
    client.on('error', (error: Error) => {
      const { host, port } = client.options;
      if (error.message !== lastError)
        logger.warn(`Redis ${host}:${port}: ${error.message}`);
      lastError = error.message;
    });
    client.on('ready', () => (lastError = ''));
    return client;
  });
  return new QuorumLockBackend({
    nodes: clients,
    ownsClients: opened,
    // A restarted node sits out the longest lease this service sets.
    maxLeaseMs: Math.max(resolved.watchdogLeaseTime, resolved.leaseTime ?? 0),
    keyPrefix: resolved.keyPrefix,
  });
}

function isRedisClient(value: unknown): value is Redis | Cluster {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Redis).duplicate === 'function' &&
    typeof (value as Redis).defineCommand === 'function'
  );
}

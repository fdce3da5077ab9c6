import type {
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { MemoryLockBackend } from '../backends/memory/memory-lock-backend.js';
import { LockBackendError } from '../errors/lock-errors.js';
import type { LockService } from '../lock-service/lock.service.js';
import {
  lockOptionDefaults,
  resolveLockOptions,
  type DistributedLockModuleOptions,
} from '../module/distributed-lock.options.js';
import { MemorySemaphoreBackend } from './memory/memory-semaphore-backend.js';
import { RedisSemaphoreBackend } from './redis/redis-semaphore-backend.js';
import type { SemaphoreBackend } from './semaphore-backend.js';
import {
  setSemaphoreService,
  unsetSemaphoreService,
} from './semaphore-binding.js';
import { SemaphoreService } from './semaphore.service.js';

/** The Redis connection each module's LockService runs on, for its semaphores. */
const moduleClients = new WeakMap<LockService, Redis | Cluster>();

/** Records that `locks` runs on `client`: the module's semaphores use it too. */
export function shareRedisWithSemaphores(
  locks: LockService,
  client: Redis | Cluster,
): void {
  moduleClients.set(locks, client);
}

/** A SemaphoreService that serves the decorator while the app runs. */
class ManagedSemaphoreService
  extends SemaphoreService
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  onApplicationBootstrap(): void {
    setSemaphoreService(this);
  }

  async onApplicationShutdown(): Promise<void> {
    unsetSemaphoreService(this);
    await this.close();
  }
}

/**
 * The module's SemaphoreService, on the store of its LockService: the same
 * Redis or Cluster client (one more connection, for pub/sub wake-ups), or
 * memory when the module runs on a `MemoryLockBackend`. The watchdog lease
 * is the module's `sessionTtl` (default 5 s): a dead process's permits come
 * back within it, as its locks do.
 */
export function createSemaphoreService(
  options: DistributedLockModuleOptions,
  locks: LockService,
): SemaphoreService {
  const resolved = resolveLockOptions(options);
  const client = moduleClients.get(locks);
  let backend: SemaphoreBackend;
  if (options.backend instanceof MemoryLockBackend)
    backend = new MemorySemaphoreBackend();
  else if (client)
    backend = new RedisSemaphoreBackend({
      client,
      commandTimeoutMs: resolved.commandTimeout,
    });
  else backend = unavailableBackend(options);
  return new ManagedSemaphoreService({
    backend,
    keyPrefix: resolved.keyPrefix,
    leaseTime: resolved.sessionTtl ?? lockOptionDefaults.sessionTtl,
    waitTime: resolved.waitTime,
    maxKeyLength: resolved.maxKeyLength,
  });
}

/**
 * Quorum (`nodes`) and custom backends have no semaphore store: each call
 * says so. (A quorum semaphore would need a majority of nodes to agree on
 * every holder set and queue order, which independent FIFO queues cannot.)
 */
function unavailableBackend(
  options: DistributedLockModuleOptions,
): SemaphoreBackend {
  const why = options.nodes
    ? 'the quorum backend (`nodes`) has no semaphores'
    : 'a custom `backend` other than MemoryLockBackend has no semaphores';
  const fail = () =>
    Promise.reject(
      new LockBackendError(
        `Semaphores need the module's Redis or Cluster connection: ${why}`,
      ),
    );
  return {
    acquire: fail,
    extend: fail,
    release: fail,
    close: () => Promise.resolve(),
  };
}

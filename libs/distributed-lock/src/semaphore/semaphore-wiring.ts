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
 * memory when the module runs on a `MemoryLockBackend`. Holds are not bound
 * to the process session: each renews a watchdog lease of its own, of the
 * module's `sessionTtl` (default 5 s, and 5 s with `sessionTtl: false`, as a
 * hold must have some lease), so a dead process's permits come back within
 * it, as its locks do.
 */
export function createSemaphoreService(
  options: DistributedLockModuleOptions,
  locks: LockService,
): SemaphoreService {
  const resolved = resolveLockOptions(options);
  return new ManagedSemaphoreService({
    backend: createSemaphoreBackend(options, locks),
    keyPrefix: resolved.keyPrefix,
    leaseTime: resolved.sessionTtl ?? lockOptionDefaults.sessionTtl,
    waitTime: resolved.waitTime,
    maxKeyLength: resolved.maxKeyLength,
  });
}

/**
 * A semaphore store on the store of the module's LockService: Redis or
 * Cluster on its client (with a pub/sub connection of its own), memory for a
 * `MemoryLockBackend`, else one whose every call fails. Semaphores and
 * read-write locks each get their own.
 */
export function createSemaphoreBackend(
  options: DistributedLockModuleOptions,
  locks: LockService,
): SemaphoreBackend {
  const client = moduleClients.get(locks);
  if (options.backend instanceof MemoryLockBackend)
    return new MemorySemaphoreBackend();
  if (client)
    return new RedisSemaphoreBackend({
      client,
      commandTimeoutMs: resolveLockOptions(options).commandTimeout,
    });
  return unavailableBackend(options);
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
    ? 'the quorum backend (`nodes`) has none'
    : 'a custom `backend` other than MemoryLockBackend has none';
  const fail = () =>
    Promise.reject(
      new LockBackendError(
        `Semaphores and read-write locks need the module's Redis or Cluster connection: ${why}`,
      ),
    );
  return {
    acquire: fail,
    extend: fail,
    release: fail,
    close: () => Promise.resolve(),
  };
}

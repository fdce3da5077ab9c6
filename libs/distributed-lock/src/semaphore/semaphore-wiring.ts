import type {
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { MemoryLockBackend } from '../backends/memory/memory-lock-backend.js';
import {
  LockUnsupportedError,
  type LockPrimitive,
} from '../errors/lock-errors.js';
import type { LockService } from '../lock-service/lock.service.js';
import type { DistributedLockModuleOptions } from '../module/distributed-lock.options.js';
import {
  lockOptionDefaults,
  resolveLockOptions,
} from '../module/resolve-lock-options.js';
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
    backend: createSemaphoreBackend(options, locks, 'semaphore'),
    keyPrefix: resolved.keyPrefix,
    leaseTime: resolved.sessionTtl ?? lockOptionDefaults.sessionTtl,
    waitTime: resolved.waitTime,
    maxKeyLength: resolved.maxKeyLength,
  });
}

/**
 * A semaphore store on the store of the module's LockService: Redis or
 * Cluster on its client (with a pub/sub connection of its own), memory for a
 * `MemoryLockBackend`, else one whose every call fails with
 * `LockUnsupportedError` for `primitive`. Semaphores and read-write locks
 * each get their own.
 */
export function createSemaphoreBackend(
  options: DistributedLockModuleOptions,
  locks: LockService,
  primitive: LockPrimitive,
): SemaphoreBackend {
  const client = moduleClients.get(locks);
  if (options.backend instanceof MemoryLockBackend)
    return new MemorySemaphoreBackend();
  if (client)
    return new RedisSemaphoreBackend({
      client,
      commandTimeoutMs: resolveLockOptions(options).commandTimeout,
    });
  return unsupportedBackend(() =>
    unsupportedError(primitive, noStoreReason(options)),
  );
}

/**
 * Why the module has no semaphore store, or undefined when it has one.
 * Quorum (`nodes`) and custom backends have none. (A quorum semaphore would
 * need a majority of nodes to agree on every holder set and queue order,
 * which independent FIFO queues cannot.)
 */
export function missingSemaphoreStore(
  options: DistributedLockModuleOptions,
  locks: LockService,
): string | undefined {
  if (options.backend instanceof MemoryLockBackend) return undefined;
  if (moduleClients.has(locks)) return undefined;
  return noStoreReason(options);
}

function noStoreReason(options: DistributedLockModuleOptions): string {
  return options.nodes
    ? 'the quorum backend (`nodes`) has none'
    : 'a custom `backend` other than MemoryLockBackend has none';
}

/**
 * The error for `primitive` on a module without a semaphore store, naming
 * the decorated `method` that uses it when there is one.
 */
export function unsupportedError(
  primitive: LockPrimitive,
  why: string,
  method?: string,
): LockUnsupportedError {
  const what = primitive === 'semaphore' ? 'Semaphores' : 'Read-write locks';
  const reason = `${what} need the module's Redis or Cluster connection: ${why}`;
  return new LockUnsupportedError(
    primitive,
    method ? `${method}: ${reason}` : reason,
  );
}

/** A store whose every call fails at once with the error `refusal` makes. */
function unsupportedBackend(
  refusal: () => LockUnsupportedError,
): SemaphoreBackend {
  const fail = () => Promise.reject(refusal());
  return {
    acquire: fail,
    extend: fail,
    release: fail,
    close: () => Promise.resolve(),
  };
}

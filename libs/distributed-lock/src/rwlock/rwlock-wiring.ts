import type {
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import type { LockService } from '../lock-service/lock.service.js';
import type { DistributedLockModuleOptions } from '../module/distributed-lock.options.js';
import {
  lockOptionDefaults,
  resolveLockOptions,
} from '../module/resolve-lock-options.js';
import { createSemaphoreBackend } from '../semaphore/semaphore-wiring.js';
import {
  setReadWriteLockService,
  unsetReadWriteLockService,
} from './rwlock-binding.js';
import { ReadWriteLockService } from './read-write-lock.service.js';

/** A ReadWriteLockService that serves the decorators while the app runs. */
class ManagedReadWriteLockService
  extends ReadWriteLockService
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  onApplicationBootstrap(): void {
    setReadWriteLockService(this);
  }

  async onApplicationShutdown(): Promise<void> {
    unsetReadWriteLockService(this);
    await this.close();
  }
}

/**
 * The module's ReadWriteLockService, on a semaphore store of its own over
 * the store of its LockService (the same Redis or Cluster client, one more
 * connection for pub/sub wake-ups; memory for a `MemoryLockBackend`). As
 * for semaphores, each hold renews a watchdog lease of its own, of the
 * module's `sessionTtl` (5 s by default and with `sessionTtl: false`): a
 * dead process's holds come back within it.
 */
export function createReadWriteLockService(
  options: DistributedLockModuleOptions,
  locks: LockService,
): ReadWriteLockService {
  const resolved = resolveLockOptions(options);
  return new ManagedReadWriteLockService({
    backend: createSemaphoreBackend(options, locks, 'read-write lock'),
    keyPrefix: resolved.keyPrefix,
    leaseTime: resolved.sessionTtl ?? lockOptionDefaults.sessionTtl,
    waitTime: resolved.waitTime,
    maxKeyLength: resolved.maxKeyLength,
  });
}

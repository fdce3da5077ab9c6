import type { ReadWriteLockService } from './read-write-lock.service.js';

/**
 * `@ReadLock` and `@WriteLock` methods are wrapped when their class is
 * defined; each call uses the ReadWriteLockService of the most recently
 * started DistributedLockModule of the process.
 */
let current: ReadWriteLockService | undefined;

export function setReadWriteLockService(service: ReadWriteLockService): void {
  current = service;
}

export function unsetReadWriteLockService(service: ReadWriteLockService): void {
  if (current === service) current = undefined;
}

export function readWriteLockServiceForCall(
  decorator: string,
): ReadWriteLockService {
  if (!current)
    throw new Error(
      `A ${decorator} method was called, but no DistributedLockModule has started. ` +
        'Import DistributedLockModule.forRoot(...) in your application module.',
    );
  return current;
}

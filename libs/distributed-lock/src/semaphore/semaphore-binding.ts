import type { SemaphoreService } from './semaphore.service.js';

/**
 * `@DistributedSemaphore` methods are wrapped when their class is defined;
 * each call uses the SemaphoreService of the most recently started
 * DistributedLockModule of the process.
 */
let current: SemaphoreService | undefined;

export function setSemaphoreService(service: SemaphoreService): void {
  current = service;
}

export function unsetSemaphoreService(service: SemaphoreService): void {
  if (current === service) current = undefined;
}

export function semaphoreServiceForCall(): SemaphoreService {
  if (!current)
    throw new Error(
      'A @DistributedSemaphore method was called, but no DistributedLockModule has started. ' +
        'Import DistributedLockModule.forRoot(...) in your application module.',
    );
  return current;
}

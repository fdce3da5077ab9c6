import type { LockService } from '../lock-service/lock.service.js';

/**
 * Decorated methods are wrapped when their class is defined, long before any
 * LockService exists. At bootstrap the module's explorer binds each instance
 * that has decorated methods to its app's LockService; the wrapper looks it up
 * per call. Instances Nest did not create at bootstrap (request-scoped
 * providers, classes built with `new`) fall back to the most recently started
 * LockService of the process.
 */
const bound = new WeakMap<object, LockService>();
let fallback: LockService | undefined;

export function bindLockService(instance: object, service: LockService): void {
  bound.set(instance, service);
}

export function setFallbackLockService(service: LockService | undefined): void {
  fallback = service;
}

export function fallbackLockService(): LockService | undefined {
  return fallback;
}

export function lockServiceFor(instance: unknown): LockService {
  const service =
    (typeof instance === 'object' &&
      instance !== null &&
      bound.get(instance)) ||
    fallback;
  if (!service) {
    throw new Error(
      'A @DistributedLock method was called, but no DistributedLockModule has started. ' +
        'Import DistributedLockModule.forRoot(...) in your application module.',
    );
  }
  return service;
}

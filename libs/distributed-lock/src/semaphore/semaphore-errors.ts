import { LockError, LockNotAcquiredError } from '../errors/lock-errors.js';

/**
 * Two callers use the same semaphore with a different number of permits
 * (`limit`). The first caller's limit stands while anyone holds or waits for
 * the semaphore; it is forgotten once the semaphore is idle. Nothing was
 * acquired.
 */
export class SemaphoreLimitMismatchError extends LockError {
  readonly code = 'SEMAPHORE_LIMIT_MISMATCH';

  constructor(
    /** The semaphore's name (without the configured prefix). */
    readonly key: string,
    /** The limit this caller asked for. */
    readonly requested: number,
    /** The limit the semaphore has, set by whoever used it first. */
    readonly current: number,
  ) {
    super(
      `Semaphore "${key}" has ${current} permits, but this caller asked for a limit of ${requested}`,
    );
  }
}

/**
 * Not enough permits of a semaphore came free within the wait time. A
 * `LockNotAcquiredError`, so the interceptor answers 409 as for a busy lock.
 */
export class SemaphoreNotAcquiredError extends LockNotAcquiredError {
  constructor(
    key: string,
    waitedMs: number,
    /** Permits asked for. */
    readonly permits: number,
    retryAfterMs?: number,
  ) {
    super(key, waitedMs, retryAfterMs);
    this.message = `Semaphore "${key}" has fewer than ${permits} free permit(s) (waited ${waitedMs} ms)`;
  }
}

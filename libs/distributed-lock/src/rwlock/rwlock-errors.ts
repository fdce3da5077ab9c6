import { LockError, LockNotAcquiredError } from '../errors/lock-errors.js';

/** Which side of a read-write lock a call asked for. */
export type ReadWriteLockMode = 'read' | 'write';

/**
 * A call chain that holds a read lock asked for the write lock of the same
 * name. Refused at once, as Redisson refuses it: two readers upgrading at
 * the same time would each wait for the other to leave, forever. Release
 * the read lock first, or take the write lock from the start (a writer may
 * take the read lock inside its hold). Nothing was acquired.
 */
export class LockUpgradeError extends LockError {
  readonly code = 'LOCK_UPGRADE_REFUSED';

  constructor(
    /** The lock's name (without the configured prefix). */
    readonly key: string,
  ) {
    super(
      `Read-write lock "${key}": this call chain holds the read lock and cannot upgrade to the write lock; release the read lock first`,
    );
  }
}

/**
 * The read or write lock did not come free within the wait time. A
 * `LockNotAcquiredError`, so the interceptor answers 409 as for a busy lock.
 */
export class ReadWriteLockNotAcquiredError extends LockNotAcquiredError {
  constructor(
    key: string,
    /** The side asked for. */
    readonly mode: ReadWriteLockMode,
    waitedMs: number,
    retryAfterMs?: number,
  ) {
    super(key, waitedMs, retryAfterMs);
    this.message = `Read-write lock "${key}" is busy for ${mode === 'write' ? 'writing' : 'reading'} (waited ${waitedMs} ms)`;
  }
}

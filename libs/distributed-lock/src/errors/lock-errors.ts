/**
 * Every error this library throws extends {@link LockError}, so callers can tell
 * "busy", "bad key", "Redis down" and "lock lost" apart by class or by `code`.
 */
export abstract class LockError extends Error {
  /** Stable, machine-readable error code. */
  abstract readonly code: string;

  protected constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A lock key template could not be parsed; thrown while the application starts. */
export class LockTemplateError extends LockError {
  readonly code = 'LOCK_TEMPLATE_INVALID';

  constructor(
    message: string,
    readonly template: string,
    readonly className?: string,
    readonly methodName?: string,
  ) {
    super(message);
  }
}

/**
 * A key could not be built from the call's arguments (a placeholder resolved to
 * undefined, null, an object or an empty string), or the key is malformed or
 * too long. Nothing was locked.
 */
export class LockKeyError extends LockError {
  readonly code = 'LOCK_KEY_INVALID';

  constructor(
    message: string,
    readonly template?: string,
    readonly placeholder?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The lock was still held by someone else when the wait time ran out. */
export class LockNotAcquiredError extends LockError {
  readonly code = 'LOCK_NOT_ACQUIRED';

  constructor(
    /** The key (without the configured prefix) that could not be taken. */
    readonly key: string,
    /** How long the caller waited, in milliseconds. */
    readonly waitedMs: number,
    /** A hint for when the lock may be free, in milliseconds (the holder's remaining lease), if known. */
    readonly retryAfterMs?: number,
    /** `cause`: the reason of the caller's `signal` when aborting it ended the wait. */
    options?: { cause?: unknown },
  ) {
    super(
      `Lock "${key}" is held by another owner (waited ${waitedMs} ms)`,
      options,
    );
  }
}

/** The lock store (Redis) could not be reached or did not answer in time. */
export class LockBackendError extends LockError {
  readonly code = 'LOCK_BACKEND_UNAVAILABLE';

  // Widens the base class's protected constructor.
  // oxlint-disable-next-line no-useless-constructor
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A primitive of this library other than the mutex. */
export type LockPrimitive = 'semaphore' | 'read-write lock';

/**
 * The module's lock store has no support for this primitive: a module on the
 * quorum backend (`nodes`) or on a custom `backend` other than
 * `MemoryLockBackend` has no semaphore store, so semaphores and read-write
 * locks are refused there. A configuration error, not an outage: retrying
 * cannot help, so the interceptor answers 500 without `Retry-After`. An app
 * with a `@DistributedSemaphore`, `@ReadLock` or `@WriteLock` method fails
 * to start with it; a call through `SemaphoreService` or
 * `ReadWriteLockService` rejects with it at once. Nothing was acquired.
 */
export class LockUnsupportedError extends LockError {
  readonly code = 'LOCK_UNSUPPORTED';

  constructor(
    /** The primitive the store cannot provide. */
    readonly primitive: LockPrimitive,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The lock expired or was taken over while its holder still counted on it, or a
 * nested (reentrant) acquisition found its outer lock already lost.
 */
export class LockLostError extends LockError {
  readonly code = 'LOCK_LOST';

  constructor(
    readonly key: string,
    message = `Lock "${key}" was lost`,
  ) {
    super(message);
  }
}

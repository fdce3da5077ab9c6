/**
 * The contract between {@link SemaphoreService} and a semaphore store. The
 * service owns names, validation, leases and the watchdog; a backend grants,
 * extends and releases one holder's permits atomically and makes callers
 * wait, first come first served.
 *
 * Keys are already validated and prefixed. Every method reports failure by
 * rejecting, never by throwing.
 */
export interface SemaphoreBackend {
  /**
   * Takes `permits` of the semaphore `key` (of `limit` in all) for `token`,
   * waiting up to `waitMs` (0 = try once). Callers are served in arrival
   * order: a request at the head of the queue that does not fit yet holds
   * back every later one, however small, so large requests are never
   * starved. Rejects with `SemaphoreLimitMismatchError` when the semaphore
   * is in use with another limit, and `LockBackendError` when the store
   * cannot be reached in bounded time.
   */
  acquire(request: SemaphoreRequest): Promise<SemaphoreGrant | SemaphoreBusy>;

  /**
   * Sets the remaining lease of `token`'s permits to `leaseMs`. Resolves
   * false when they are no longer held (expired).
   */
  extend(key: string, token: string, leaseMs: number): Promise<boolean>;

  /**
   * Gives `token`'s permits back (and drops it from the queue). Resolves
   * false, touching no one else's permits, when `token` held none.
   */
  release(key: string, token: string): Promise<boolean>;

  /** Stops waiting callers and frees connections the backend owns. Idempotent. */
  close(): Promise<void>;
}

export interface SemaphoreRequest {
  /** Prefixed key (the name in a Cluster hash tag). */
  readonly key: string;
  /** The unprefixed name, for errors. */
  readonly name: string;
  /** Random owner token, at least 128 bits. */
  readonly token: string;
  /** Permits to take at once, 1..limit. */
  readonly permits: number;
  /** Permits the semaphore has in all. */
  readonly limit: number;
  /** Lease to set, in ms. */
  readonly leaseMs: number;
  /** How long to wait, in ms; 0 tries once. */
  readonly waitMs: number;
  /** Aborting it stops waiting (the acquisition then resolves busy). */
  readonly signal?: AbortSignal;
  /**
   * Issue a fencing token with the grant, in the same atomic step: one more
   * than any issued for this key before (the store keeps its counter per key
   * for good, also once the semaphore is idle). Read-write locks set it for
   * writers. Default false.
   */
  readonly fence?: boolean;
}

export interface SemaphoreGrant {
  readonly acquired: true;
  /** The lease the permits have at least, counted from when acquire was called. */
  readonly leaseMs: number;
  /**
   * With `fence` set: the grant's fencing token, strictly above every token
   * issued for this key before. A request answered again (sent twice after
   * a lost answer) gets the token of its grant, not a new one.
   */
  readonly fencingToken?: number;
}

export interface SemaphoreBusy {
  readonly acquired: false;
  /** When the earliest held lease ends, in ms, when known. */
  readonly retryAfterMs?: number;
}

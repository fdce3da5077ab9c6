import type { HeldKey } from '../lock-service/held-key.js';

/**
 * Permits of a semaphore held by this process. Release it exactly once, in a
 * `finally` (or use `SemaphoreService.using`, which does).
 */
export class SemaphoreHandle {
  private releasing?: Promise<boolean>;

  /** @internal Created by SemaphoreService. */
  constructor(
    /** The semaphore's name, without prefix. */
    readonly name: string,
    /** Permits held. */
    readonly permits: number,
    /** Permits the semaphore has in all. */
    readonly limit: number,
    private readonly held: HeldKey,
    private readonly onRelease: (held: HeldKey) => Promise<boolean>,
  ) {}

  /** The random owner token of these permits. */
  get token(): string {
    return this.held.token;
  }

  /** Aborted, with a `LockLostError` as reason, once the permits are known lost. */
  get signal(): AbortSignal {
    return this.held.signal;
  }

  /** Whether the permits are known lost (lease ran out, renewals failed). */
  get lost(): boolean {
    return this.held.lost;
  }

  /** Local estimate (ms since epoch) of when the lease ends; errs early. */
  get expiresAt(): number {
    return this.held.expiresAt;
  }

  /**
   * Sets the remaining lease to `leaseMs` from now (on a watchdog hold, also
   * the lease renewed to from then on). False (and {@link signal} aborted)
   * when the permits are no longer held.
   */
  extend(leaseMs: number): Promise<boolean> {
    if (!(leaseMs > 0) || !Number.isFinite(leaseMs))
      return Promise.reject(
        new RangeError(`extend() needs a positive lease in ms, got ${leaseMs}`),
      );
    return this.held.extend(leaseMs);
  }

  /**
   * Gives the permits back, to the head of the queue. False when they had
   * been lost (nobody else's permits are touched). Calling it again returns
   * the first result.
   */
  release(): Promise<boolean> {
    this.releasing ??= this.onRelease(this.held);
    return this.releasing;
  }

  /**
   * Runs `fn` with the permits' {@link signal} and releases them when it
   * settles, as `SemaphoreService.using` does.
   */
  async run<T>(fn: (signal: AbortSignal) => T | Promise<T>): Promise<T> {
    try {
      return await fn(this.signal);
    } finally {
      await this.release().catch(() => false);
    }
  }
}

import { Logger } from '@nestjs/common';
import type { LockBackend } from '../backends/lock-backend.js';
import { LockBackendError } from '../errors/lock-errors.js';
import { validateLockKey } from '../key-template/lock-key-rules.js';
import { monotonicNow } from '../lease/lease-clock.js';
import { HeldKey } from '../lock-service/held-key.js';
import { checkedMs } from '../lock-service/lock-settings.js';
import { newOwnerToken } from '../lock-service/owner-token.js';
import type { SemaphoreBackend } from './semaphore-backend.js';
import { SemaphoreNotAcquiredError } from './semaphore-errors.js';
import { SemaphoreHandle } from './semaphore-handle.js';

/** Per-call options of `SemaphoreService.acquire` and friends. */
export interface SemaphoreOptions {
  /**
   * Permits the semaphore has in all (N). The first caller sets it; while
   * the semaphore is in use, a caller with another limit gets
   * `SemaphoreLimitMismatchError`.
   */
  readonly limit: number;
  /** Permits to take at once (k), 1..limit. Default 1. */
  readonly permits?: number;
  /** How long to wait for the permits, in ms; 0 tries once. Default: the module's `waitTime`. */
  readonly waitTime?: number;
  /**
   * Lease in ms. Given: the permits are given back after it, never renewed.
   * Omitted: a watchdog renews the lease (the service's `leaseTime`) every
   * third of it, so a process that dies gives its permits back within it.
   */
  readonly leaseTime?: number;
  /** Aborting it stops waiting. */
  readonly signal?: AbortSignal;
}

/** Settings the service runs with (the module fills them from its options). */
export interface SemaphoreServiceSettings {
  readonly backend: SemaphoreBackend;
  /** Prefix of every key in the store; semaphores add `sem:`. */
  readonly keyPrefix: string;
  /** The lease the watchdog keeps alive: the bound on a dead holder's permits. */
  readonly leaseTime: number;
  /** Default wait. */
  readonly waitTime: number;
  readonly maxKeyLength: number;
}

/**
 * Counting semaphores: at most `limit` permits of a name held at once across
 * every process on the store, handed out first come, first served. Inject it
 * anywhere once `DistributedLockModule` is imported.
 */
export class SemaphoreService {
  private readonly logger = new Logger('DistributedSemaphore');
  private readonly active = new Set<HeldKey>();
  /** A `LockBackend` face of the semaphore store, for `HeldKey`'s lease work. */
  private readonly leases: LockBackend;
  private closed = false;

  /** @internal Built by DistributedLockModule; inject SemaphoreService instead. */
  constructor(private readonly settings: SemaphoreServiceSettings) {
    checkedMs('leaseTime', settings.leaseTime, false);
    this.leases = leaseStore(settings.backend);
  }

  /**
   * Takes `permits` of semaphore `name`, waiting up to `waitTime`.
   *
   * @throws SemaphoreNotAcquiredError (a `LockNotAcquiredError`) when they did
   *   not come free in time
   * @throws SemaphoreLimitMismatchError when the semaphore is in use with
   *   another limit
   * @throws LockKeyError for an empty, malformed or too long name
   * @throws LockBackendError when the store cannot be reached in bounded time
   * @throws LockUnsupportedError at once when the module's store has no
   *   semaphores (quorum `nodes` or a custom backend)
   * @throws RangeError for a limit or permits that are not whole numbers
   *   with 1 <= permits <= limit
   */
  async acquire(
    name: string,
    options: SemaphoreOptions,
  ): Promise<SemaphoreHandle> {
    const { settings } = this;
    const key = validateLockKey(name, settings.maxKeyLength);
    const { limit, permits = 1 } = options;
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new RangeError(
        `limit must be a positive whole number, got ${String(limit)}`,
      );
    if (!Number.isSafeInteger(permits) || permits < 1 || permits > limit)
      throw new RangeError(
        `permits must be a whole number from 1 to the limit (${limit}), got ${String(permits)}`,
      );
    const waitMs = checkedMs(
      'waitTime',
      options.waitTime ?? settings.waitTime,
      true,
    );
    const explicit = options.leaseTime;
    const leaseMs = checkedMs(
      'leaseTime',
      explicit ?? settings.leaseTime,
      false,
    );
    if (this.closed) throw new SemaphoreNotAcquiredError(key, 0, permits);
    const storeKey = this.storeKey(key);
    const token = newOwnerToken();
    const sentAt = monotonicNow();
    const outcome = await settings.backend.acquire({
      key: storeKey,
      name: key,
      token,
      permits,
      limit,
      leaseMs,
      waitMs,
      signal: options.signal,
    });
    if (!outcome.acquired)
      throw new SemaphoreNotAcquiredError(
        key,
        Math.round(monotonicNow() - sentAt),
        permits,
        outcome.retryAfterMs,
      );
    const held = new HeldKey({
      name: key,
      scopeKey: `semaphore:${storeKey}`,
      storeKey,
      token,
      policy: { leaseMs, watchdog: explicit === undefined },
      grantedLeaseMs: outcome.leaseMs,
      sentAt,
      backend: this.leases,
      onLost: (lost, reason) => {
        this.active.delete(lost);
        this.logger.warn(
          `Semaphore "${lost.name}": permits lost (${reason}) while still held`,
        );
      },
    });
    this.active.add(held);
    return new SemaphoreHandle(key, permits, limit, held, this.releaseHeld);
  }

  /** Like {@link acquire} with `waitTime: 0` by default, but resolves null when busy. */
  async tryAcquire(
    name: string,
    options: SemaphoreOptions,
  ): Promise<SemaphoreHandle | null> {
    try {
      return await this.acquire(name, { waitTime: 0, ...options });
    } catch (error) {
      if (error instanceof SemaphoreNotAcquiredError) return null;
      throw error;
    }
  }

  /** Runs `fn` holding the permits and always gives them back, when `fn` throws too. */
  async using<T>(
    name: string,
    fn: (handle: SemaphoreHandle) => T | Promise<T>,
    options: SemaphoreOptions,
  ): Promise<T> {
    const handle = await this.acquire(name, options);
    return handle.run(() => fn(handle));
  }

  /** The key prefix of a semaphore as stored, e.g. `lock:sem:{partner-api}`. */
  storeKey(name: string): string {
    return `${this.settings.keyPrefix}sem:{${name}}`;
  }

  /** Gives back every permit held here (best effort) and closes the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const held = [...this.active];
    this.active.clear();
    await Promise.all(held.map((h) => h.release().catch(() => false)));
    await this.settings.backend.close();
  }

  private readonly releaseHeld = async (held: HeldKey): Promise<boolean> => {
    this.active.delete(held);
    return held.release();
  };
}

const unsupported = () =>
  Promise.reject(new LockBackendError('Not a semaphore operation'));

/**
 * `HeldKey` renews, releases and watches a lease through a `LockBackend`;
 * this is the semaphore store seen that way (it issues no fencing tokens
 * after the grant). Read-write locks use it too.
 * @internal
 */
export function leaseStore(backend: SemaphoreBackend): LockBackend {
  return {
    acquire: unsupported,
    isLocked: unsupported,
    extend: (key, token, leaseMs) => backend.extend(key, token, leaseMs),
    release: (key, token) => backend.release(key, token),
    fence: () => Promise.resolve(undefined),
    close: () => Promise.resolve(),
  };
}

import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { LockLostError } from '../errors/lock-errors.js';
import { validateLockKey } from '../key-template/lock-key-rules.js';
import { monotonicNow } from '../lease/lease-clock.js';
import type { LockBackend } from '../backends/lock-backend.js';
import { HeldKey } from '../lock-service/held-key.js';
import { checkedMs } from '../lock-service/lock-settings.js';
import { newOwnerToken } from '../lock-service/owner-token.js';
import type { SemaphoreBackend } from '../semaphore/semaphore-backend.js';
import { leaseStore } from '../semaphore/semaphore.service.js';
import { ReadWriteLockHandle } from './read-write-lock-handle.js';
import {
  LockUpgradeError,
  ReadWriteLockNotAcquiredError,
  type ReadWriteLockMode,
} from './rwlock-errors.js';
import { chainHold } from './rwlock-scope.js';

/**
 * The most readers a read-write lock admits at once. A read-write lock is a
 * semaphore of this many permits: a reader takes one, a writer all of them.
 */
export const MAX_READERS = 1_000_000;

/** Per-call options of `ReadWriteLockService.read`, `write` and friends. */
export interface ReadWriteLockOptions {
  /** How long to wait for the lock, in ms; 0 tries once. Default: the module's `waitTime`. */
  readonly waitTime?: number;
  /**
   * Lease in ms. Given: the hold ends after it, never renewed. Omitted: a
   * watchdog renews the lease (the service's `leaseTime`) every third of
   * it, so a process that dies gives the lock back within it.
   */
  readonly leaseTime?: number;
  /** Aborting it stops waiting. */
  readonly signal?: AbortSignal;
}

/** Settings the service runs with (the module fills them from its options). */
export interface ReadWriteLockServiceSettings {
  /** The semaphore store the locks live in. */
  readonly backend: SemaphoreBackend;
  /** Prefix of every key in the store; read-write locks add `rw:`. */
  readonly keyPrefix: string;
  /** The lease the watchdog keeps alive: the bound on a dead holder's lock. */
  readonly leaseTime: number;
  /** Default wait. */
  readonly waitTime: number;
  readonly maxKeyLength: number;
}

/**
 * Read-write locks: many readers or one writer per name, across every
 * process on the store. Callers are served first come, first served, so a
 * waiting writer holds back readers that come after it (writers are never
 * starved) and writers go in arrival order. Writers get a fencing token.
 * Inject it anywhere once `DistributedLockModule` is imported.
 */
export class ReadWriteLockService {
  private readonly logger = new Logger('ReadWriteLock');
  private readonly instanceId = randomBytes(6).toString('hex');
  private readonly active = new Set<HeldKey>();
  /** A `LockBackend` face of the semaphore store, for `HeldKey`'s lease work. */
  private readonly leases: LockBackend;
  private closed = false;

  /** @internal Built by DistributedLockModule; inject ReadWriteLockService instead. */
  constructor(private readonly settings: ReadWriteLockServiceSettings) {
    checkedMs('leaseTime', settings.leaseTime, false);
    this.leases = leaseStore(settings.backend);
  }

  /**
   * Takes the read lock of `name`, shared with other readers, waiting up to
   * `waitTime` for writers (held or queued ahead) to finish. Inside a hold
   * of the same lock by this call chain it joins that hold at once.
   *
   * @throws ReadWriteLockNotAcquiredError (a `LockNotAcquiredError`) when
   *   it did not come free in time
   * @throws LockLostError when the chain's hold it would join was lost
   * @throws LockKeyError for an empty, malformed or too long name
   * @throws LockBackendError when the store cannot be reached in bounded time
   * @throws LockUnsupportedError at once when the module's store has no
   *   semaphores (quorum `nodes` or a custom backend)
   * @throws RangeError for a negative `waitTime` or a `leaseTime` that is not
   *   a positive number of ms
   */
  read(
    name: string,
    options: ReadWriteLockOptions = {},
  ): Promise<ReadWriteLockHandle> {
    return this.acquire('read', name, options);
  }

  /**
   * Takes the write lock of `name`, alone, waiting up to `waitTime` for the
   * readers and writers ahead of it; readers arriving meanwhile wait behind
   * it. The handle carries a fencing token. Inside a write hold of the same
   * lock by this call chain it joins that hold at once.
   *
   * @throws LockUpgradeError at once when the chain holds the read lock
   * @throws ReadWriteLockNotAcquiredError and the rest as {@link read}
   */
  write(
    name: string,
    options: ReadWriteLockOptions = {},
  ): Promise<ReadWriteLockHandle> {
    return this.acquire('write', name, options);
  }

  /** Like {@link read} with `waitTime: 0` by default, but resolves null when busy. */
  tryRead(
    name: string,
    options: ReadWriteLockOptions = {},
  ): Promise<ReadWriteLockHandle | null> {
    return this.orNull(this.read(name, { waitTime: 0, ...options }));
  }

  /** Like {@link write} with `waitTime: 0` by default, but resolves null when busy. */
  tryWrite(
    name: string,
    options: ReadWriteLockOptions = {},
  ): Promise<ReadWriteLockHandle | null> {
    return this.orNull(this.write(name, { waitTime: 0, ...options }));
  }

  /** Runs `fn` holding the read lock and always releases it, when `fn` throws too. */
  async withRead<T>(
    name: string,
    fn: (handle: ReadWriteLockHandle) => T | Promise<T>,
    options: ReadWriteLockOptions = {},
  ): Promise<T> {
    const handle = await this.read(name, options);
    return handle.run(() => fn(handle));
  }

  /** Runs `fn` holding the write lock and always releases it, when `fn` throws too. */
  async withWrite<T>(
    name: string,
    fn: (handle: ReadWriteLockHandle) => T | Promise<T>,
    options: ReadWriteLockOptions = {},
  ): Promise<T> {
    const handle = await this.write(name, options);
    return handle.run(() => fn(handle));
  }

  /** The key prefix of a read-write lock as stored, e.g. `lock:rw:{price:7}`. */
  storeKey(name: string): string {
    return `${this.settings.keyPrefix}rw:{${name}}`;
  }

  /** Releases every hold taken here (best effort) and closes the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const held = [...this.active];
    this.active.clear();
    await Promise.all(held.map((h) => h.release().catch(() => false)));
    await this.settings.backend.close();
  }

  private async acquire(
    mode: ReadWriteLockMode,
    name: string,
    options: ReadWriteLockOptions,
  ): Promise<ReadWriteLockHandle> {
    const { settings } = this;
    const key = validateLockKey(name, settings.maxKeyLength);
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
    const storeKey = this.storeKey(key);
    const scopeKey = `rwlock:${this.instanceId}|${storeKey}`;
    const joined = this.join(mode, key, scopeKey);
    if (joined) return joined;
    if (this.closed) throw new ReadWriteLockNotAcquiredError(key, mode, 0);
    const token = newOwnerToken();
    const sentAt = monotonicNow();
    const outcome = await settings.backend.acquire({
      key: storeKey,
      name: key,
      token,
      permits: mode === 'write' ? MAX_READERS : 1,
      limit: MAX_READERS,
      leaseMs,
      waitMs,
      signal: options.signal,
      fence: mode === 'write',
    });
    if (!outcome.acquired)
      throw new ReadWriteLockNotAcquiredError(
        key,
        mode,
        Math.round(monotonicNow() - sentAt),
        outcome.retryAfterMs,
      );
    const held = new HeldKey({
      name: key,
      scopeKey,
      storeKey,
      token,
      fencingToken: outcome.fencingToken,
      policy: { leaseMs, watchdog: explicit === undefined },
      grantedLeaseMs: outcome.leaseMs,
      sentAt,
      backend: this.leases,
      onLost: (lost, reason) => {
        this.active.delete(lost);
        this.logger.warn(
          `Read-write lock "${lost.name}": ${mode} hold lost (${reason}) while still held`,
        );
      },
    });
    this.active.add(held);
    return new ReadWriteLockHandle(mode, key, held, mode, this.releaseHeld);
  }

  /**
   * A hold of the same lock by the calling chain: joined (a read or write
   * inside a write hold, a read inside a read hold), refused (a write inside
   * a read hold), or undefined when the chain holds none.
   */
  private join(
    mode: ReadWriteLockMode,
    key: string,
    scopeKey: string,
  ): ReadWriteLockHandle | undefined {
    const outer = chainHold(scopeKey);
    // A hold the chain outlived (released already) is not joined.
    if (!outer || outer.held.holds <= 0) return undefined;
    if (mode === 'write' && outer.mode === 'read')
      throw new LockUpgradeError(key);
    if (outer.held.lost)
      throw new LockLostError(
        key,
        `Read-write lock "${key}" held by the calling chain was lost`,
      );
    outer.held.holds += 1;
    return new ReadWriteLockHandle(
      mode,
      key,
      outer.held,
      outer.mode,
      this.releaseHeld,
      true,
    );
  }

  private async orNull(
    pending: Promise<ReadWriteLockHandle>,
  ): Promise<ReadWriteLockHandle | null> {
    try {
      return await pending;
    } catch (error) {
      if (error instanceof ReadWriteLockNotAcquiredError) return null;
      throw error;
    }
  }

  private readonly releaseHeld = (held: HeldKey): Promise<boolean> => {
    held.holds -= 1;
    if (held.holds > 0) return Promise.resolve(!held.lost);
    this.active.delete(held);
    return held.release();
  };
}

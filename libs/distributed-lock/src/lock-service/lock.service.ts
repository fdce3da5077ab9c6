import { EventEmitter } from 'node:events';
import { Logger } from '@nestjs/common';
import { LockError, LockNotAcquiredError } from '../errors/lock-errors.js';
import { validateLockKey } from '../key-template/lock-key-rules.js';
import { ProcessSession } from '../session/process-session.js';
import { lockNameOf } from '../telemetry/lock-observer.js';
import { LockTelemetry } from '../telemetry/lock-telemetry.js';
import type { HeldKey } from './held-key.js';
import { LockAcquirer } from './lock-acquirer.js';
import type { LockEventMap, LockLostReason } from './lock-events.js';
import type { LockHandle } from './lock-handle.js';
import {
  checkedMs,
  type LockOptions,
  type LockServiceSettings,
} from './lock-settings.js';

/**
 * Acquires and releases distributed locks. Inject it anywhere once
 * `DistributedLockModule` is imported.
 */
export class LockService {
  /** Emits `lost` when a held lock expires or is taken over while still held. */
  readonly events = new EventEmitter<LockEventMap>();
  private readonly logger = new Logger('DistributedLock');
  private readonly session?: ProcessSession;
  private readonly acquirer: LockAcquirer;
  private readonly telemetry?: LockTelemetry;
  private closed = false;

  /** @internal Built by DistributedLockModule; inject LockService instead. */
  constructor(private readonly settings: LockServiceSettings) {
    if (settings.observer)
      this.telemetry = new LockTelemetry(settings.observer);
    const store = settings.backend.sessions;
    if (store && settings.sessionTtl !== undefined)
      this.session = new ProcessSession(
        store,
        checkedMs('sessionTtl', settings.sessionTtl, false),
        (id, holds) =>
          this.logger.warn(
            `Lock session ${id} lapsed (renewals failed or the process was paused); ${holds} lock(s) bound to it are lost`,
          ),
      );
    this.acquirer = new LockAcquirer({
      settings,
      session: this.session,
      telemetry: this.telemetry,
      closed: () => this.closed,
      onLost: this.reportLost,
    });
  }

  /**
   * Acquires every key (all or nothing, in a canonical order so that two callers
   * can never deadlock), waiting up to `waitTime` in total.
   *
   * @throws LockNotAcquiredError when still busy after `waitTime`
   * @throws LockKeyError for an empty, malformed or too long key
   * @throws LockBackendError when the store cannot be reached in bounded time
   * @throws LockLostError when a reentrant acquisition finds the outer lock
   *   lost (with `fence`, also when it is lost before its token is issued)
   * @throws TypeError when `fence` is given and not a boolean, or `name`
   *   not a non-empty string
   */
  acquire(
    keyOrKeys: string | readonly string[],
    options: LockOptions = {},
  ): Promise<LockHandle> {
    const { telemetry } = this;
    if (!telemetry?.active) return this.acquirer.attempt(keyOrKeys, options);
    const name =
      typeof options.name === 'string' ? options.name : lockNameOf(keyOrKeys);
    return telemetry.acquisition(
      name,
      typeof keyOrKeys === 'string' ? [keyOrKeys] : [...keyOrKeys],
      options.waitTime ?? this.settings.waitTime,
      options.signal,
      this.acquirer.attempt(keyOrKeys, options, name),
    );
  }

  /** Like {@link acquire} with `waitTime: 0` by default, but resolves null when busy. */
  async tryAcquire(
    keyOrKeys: string | readonly string[],
    options: LockOptions = {},
  ): Promise<LockHandle | null> {
    try {
      return await this.acquire(keyOrKeys, { waitTime: 0, ...options });
    } catch (error) {
      if (error instanceof LockNotAcquiredError) return null;
      throw error;
    }
  }

  /**
   * Runs `fn` holding the lock and always releases it, when `fn` throws too.
   * Nested acquisitions of the same keys inside `fn` are reentrant.
   */
  async using<T>(
    keyOrKeys: string | readonly string[],
    fn: (lock: LockHandle) => T | Promise<T>,
    options: LockOptions = {},
  ): Promise<T> {
    const handle = await this.acquire(keyOrKeys, options);
    try {
      return await handle.run(() => fn(handle));
    } finally {
      await this.releaseQuietly(handle);
    }
  }

  /**
   * The id of this service's live process session (the `<id>` of its
   * `lock:session:{<id>}` record, and the prefix of its holders' tokens), or
   * undefined while none is open (none was needed yet, sessions are off, or
   * it lapsed and the next hold opens a new one).
   */
  get sessionId(): string | undefined {
    return this.session?.liveId;
  }

  /** @internal The store and the process session, as `LockHealthIndicator` reads them. */
  get healthSources(): {
    readonly backend: LockServiceSettings['backend'];
    readonly session?: ProcessSession;
  } {
    return { backend: this.settings.backend, session: this.session };
  }

  /** Whether anyone holds `key` right now. */
  async isLocked(key: string): Promise<boolean> {
    return this.settings.backend.isLocked(
      this.storeKey(validateLockKey(key, this.settings.maxKeyLength)),
    );
  }

  /** The key as stored, e.g. `lock:{coupon:1}` (the braces keep a lock's keys in one Cluster slot). */
  storeKey(name: string): string {
    return this.acquirer.storeKey(name);
  }

  /** @internal Releases without throwing; used where a failed release must not mask the result. */
  releaseQuietly(handle: LockHandle): Promise<void> {
    return this.releaseQuietlyThen(handle, () => undefined);
  }

  /**
   * @internal {@link releaseQuietly}, then settles as `outcome` does: one
   * reaction for both, as the decorator needs on every call.
   */
  releaseQuietlyThen<T>(handle: LockHandle, outcome: () => T): Promise<T> {
    return handle.release().then(outcome, (error: unknown) => {
      this.logger.warn(
        `Releasing ${handle.keys.join(', ')} failed (${(error as Error).message}); it ends with its lease`,
      );
      return outcome();
    });
  }

  /**
   * Stops every watchdog and the session's renewals, and closes the backend.
   * With no lock held, the process session ends at once. Locks still held
   * (a handler may still run under them) keep their protection until the
   * session lapses by itself, within `sessionTtl`; locks with an explicit
   * lease end with it.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const idle = this.acquirer.letGoOfAll();
    await this.session?.close(idle);
    await this.settings.backend.close();
  }

  private readonly reportLost = (
    held: HeldKey,
    reason: LockLostReason,
  ): void => {
    this.logger.warn(`Lock "${held.name}" lost while held (${reason})`);
    this.telemetry?.lost(held, reason);
    try {
      this.events.emit('lost', {
        key: held.name,
        token: held.token,
        fencingToken: held.fencingToken,
        reason,
      });
    } catch (error) {
      this.logger.error(`A "lost" listener threw: ${(error as Error).message}`);
    }
  };
}

export type { LockOptions, LockServiceSettings } from './lock-settings.js';

/** True for any error this library throws. */
export function isLockError(error: unknown): error is LockError {
  return error instanceof LockError;
}

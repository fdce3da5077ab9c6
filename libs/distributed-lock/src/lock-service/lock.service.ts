import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Logger } from '@nestjs/common';
import type { LockBusy, LockGrant } from '../backends/lock-backend.js';
import {
  LockError,
  LockLostError,
  LockNotAcquiredError,
} from '../errors/lock-errors.js';
import { validateLockKey } from '../key-template/lock-key-rules.js';
import { monotonicNow } from '../lease/lease-clock.js';
import { ProcessSession } from '../session/process-session.js';
import { lockNameOf } from '../telemetry/lock-observer.js';
import { LockTelemetry } from '../telemetry/lock-telemetry.js';
import {
  backendRequest,
  bindToSession,
  newAttempt,
  notAcquired,
  openSessionFor,
  sessionLapsedError,
  type Attempt,
} from './attempt.js';
import { issueMissingFences, missesFence } from './grant-fences.js';
import { HeldKey } from './held-key.js';
import type { LockEventMap, LockLostReason } from './lock-events.js';
import { LockHandle } from './lock-handle.js';
import { lockScope } from './lock-scope.js';
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
  private readonly instanceId = randomBytes(6).toString('hex');
  private readonly active = new Set<HeldKey>();
  private readonly session?: ProcessSession;
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
    if (!telemetry?.active) return this.attempt(keyOrKeys, options);
    const name =
      typeof options.name === 'string' ? options.name : lockNameOf(keyOrKeys);
    return telemetry.acquisition(
      name,
      typeof keyOrKeys === 'string' ? [keyOrKeys] : [...keyOrKeys],
      options.waitTime ?? this.settings.waitTime,
      options.signal,
      this.attempt(keyOrKeys, options, name),
    );
  }

  /** {@link acquire}, unobserved; `name` is what telemetry reports it under. */
  private attempt(
    keyOrKeys: string | readonly string[],
    options: LockOptions,
    name?: string,
  ): Promise<LockHandle> {
    let attempt: Attempt;
    try {
      if (this.closed) throw new LockNotAcquiredError(String(keyOrKeys), 0);
      attempt = newAttempt(
        keyOrKeys,
        options,
        this.settings,
        this.session,
        name,
      );
    } catch (error) {
      return Promise.reject(error as Error);
    }
    const { session } = attempt.policy;
    if (!session || attempt.bound) return this.start(attempt);
    // Joining locks the chain holds takes no new lock, so needs no session.
    if (this.joinsOnly(attempt.names)) return this.start(attempt);
    // The first hold of this session (or of the one after a lapse): its
    // record must exist before any lock is stored under its name.
    return openSessionFor(session, attempt, () => this.closed).then((id) =>
      this.start(bindToSession(attempt, id)),
    );
  }

  /** Whether the calling chain holds every one of `names` already (a reentrant acquisition). */
  private joinsOnly(names: readonly string[]): boolean {
    const outer = lockScope.getStore()?.held;
    return (
      outer !== undefined &&
      names.every(
        (name) =>
          (outer.get(this.scopeKey(this.storeKey(name)))?.holds ?? 0) > 0,
      )
    );
  }

  private start(attempt: Attempt): Promise<LockHandle> {
    const outer = lockScope.getStore()?.held;
    if (attempt.names.length === 1 && !outer) return this.acquireOne(attempt);
    return this.acquireEach(attempt, outer);
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
    return `${this.settings.keyPrefix}{${name}}`;
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
    const idle = this.active.size === 0;
    // A hold bound to the session stays bound: it is told when the session,
    // no longer renewed, lapses. Others stop here and end with their leases.
    for (const held of this.active) {
      if (held.sessionBound) held.stopRenewing();
      else held.stop();
      this.telemetry?.released(held);
    }
    this.active.clear();
    await this.session?.close(idle);
    await this.settings.backend.close();
  }

  /**
   * One key and no lock held by the calling chain, so no reentrancy to look
   * for: the common case, kept to one reaction on the store's answer (every
   * promise costs a hook call while an `AsyncLocalStorage` is in use).
   */
  private acquireOne(attempt: Attempt): Promise<LockHandle> {
    const name = attempt.names[0];
    const storeKey = this.storeKey(name);
    const sentAt = monotonicNow();
    let pending: Promise<LockGrant | LockBusy>;
    try {
      // Nothing was awaited since the attempt started.
      pending = this.settings.backend.acquire(
        backendRequest(attempt, storeKey, attempt.startedAt),
      );
    } catch (error) {
      return Promise.reject(error as Error);
    }
    return pending.then((result) => {
      if (!result.acquired) throw notAcquired(name, attempt, result);
      const held = this.hold(name, storeKey, attempt, result, sentAt);
      if (held.lostReason === 'session-expired')
        return this.sessionLapsedMeanwhile(held, attempt);
      const handle = new LockHandle([held], this.releaseHeld, false);
      if (!attempt.fence || held.fencingToken !== undefined) return handle;
      return this.fenceGranted(held, attempt).then(() => handle);
    });
  }

  /** Several keys, or a chain that holds locks already: takes the keys in order, joining held ones. */
  private async acquireEach(
    attempt: Attempt,
    outer: ReadonlyMap<string, HeldKey> | undefined,
  ): Promise<LockHandle> {
    const taken: HeldKey[] = [];
    let reentrant = true;
    try {
      for (const name of attempt.names) {
        const storeKey = this.storeKey(name);
        const joined = outer?.get(this.scopeKey(storeKey));
        // A hold the chain already released (the chain outlived it) is not
        // joined: the key may be someone else's by now. Concurrent branches of
        // one chain (a `Promise.all` inside a locked method) both join: the
        // chain is the holder, so they share the hold and run at once, and
        // the key is freed when the outermost hold and every branch released.
        if (joined && joined.holds > 0) {
          if (joined.lost)
            throw new LockLostError(
              name,
              `Lock "${name}" held by the calling chain was lost`,
            );
          joined.holds += 1;
          taken.push(joined);
          continue;
        }
        reentrant = false;
        const sentAt = monotonicNow();
        const result = await this.settings.backend.acquire(
          backendRequest(attempt, storeKey, Date.now()),
        );
        if (!result.acquired) throw notAcquired(name, attempt, result);
        taken.push(this.hold(name, storeKey, attempt, result, sentAt));
      }
      // A key's lease (or the session) ran out while the later keys were
      // awaited: the caller never gets a handle on a lock not all there.
      const lapsed = taken.find((held) => held.lost);
      if (lapsed?.lostReason === 'session-expired') {
        // Asked for again under a new session, unless the chain's own holds,
        // bound to the lapsed one, are lost with it.
        if (outer !== undefined) throw sessionLapsedError(lapsed.name);
        await this.releaseHeld(taken).catch(() => undefined);
        return this.askAgain(attempt, lapsed.name);
      }
      if (lapsed)
        throw new LockNotAcquiredError(
          lapsed.name,
          Date.now() - attempt.startedAt,
        );
      if (attempt.fence && missesFence(taken))
        await issueMissingFences(taken, outer, attempt.startedAt);
    } catch (error) {
      await this.releaseHeld(taken).catch(() => undefined);
      throw error;
    }
    return new LockHandle(taken, this.releaseHeld, reentrant);
  }

  /**
   * Issues the fencing token a grant asked for with `fence` came without
   * (see {@link issueMissingFences}); gives the key back when that fails.
   */
  private fenceGranted(held: HeldKey, attempt: Attempt): Promise<void> {
    return issueMissingFences([held], undefined, attempt.startedAt).catch(
      async (error: unknown) => {
        await this.releaseHeld([held]).catch(() => undefined);
        throw error;
      },
    );
  }

  /**
   * The session lapsed while the grant was on its way: the lock is given
   * back, and asked for again under a new session within what is left of
   * the wait.
   */
  private async sessionLapsedMeanwhile(
    held: HeldKey,
    attempt: Attempt,
  ): Promise<LockHandle> {
    await this.releaseHeld([held]).catch(() => undefined);
    return this.askAgain(attempt, held.name);
  }

  /** The attempt once more under a new session, within what is left of its wait. */
  private askAgain(attempt: Attempt, name: string): Promise<LockHandle> {
    const waitTime = attempt.deadline - Date.now();
    if (this.closed)
      return Promise.reject(
        new LockNotAcquiredError(name, Date.now() - attempt.startedAt),
      );
    if (waitTime <= 0) return Promise.reject(sessionLapsedError(name));
    return this.attempt(
      attempt.names,
      { waitTime, signal: attempt.signal, fence: attempt.fence },
      attempt.observed ? attempt.name : undefined,
    );
  }

  /** Starts keeping a granted key: its watchdog or expiry notice. */
  private hold(
    name: string,
    storeKey: string,
    attempt: Attempt,
    grant: LockGrant,
    sentAt: number,
  ): HeldKey {
    const held = new HeldKey({
      name,
      scopeKey: this.scopeKey(storeKey),
      storeKey,
      token: attempt.token,
      fencingToken: grant.fencingToken,
      policy: attempt.policy,
      grantedLeaseMs: grant.leaseMs,
      sentAt,
      backend: this.settings.backend,
      onLost: this.reportLost,
    });
    this.active.add(held);
    if (attempt.observed) this.telemetry?.held(held, attempt.name ?? name);
    return held;
  }

  /** Identifies a held key in the call chain's scope: this service and the store key. */
  private scopeKey(storeKey: string): string {
    return `${this.instanceId}|${storeKey}`;
  }

  // Plain functions returning the store's promise, not async ones: each
  // async layer adds microtask hops to every release.
  private readonly releaseHeld = (
    held: readonly HeldKey[],
  ): Promise<boolean> => {
    if (held.length === 1) return this.releaseOne(held[0]);
    return this.releaseMany(held);
  };

  private async releaseMany(held: readonly HeldKey[]): Promise<boolean> {
    const results = await Promise.allSettled(
      // Reverse order: the last key taken is the first given back.
      held.toReversed().map((h) => this.releaseOne(h)),
    );
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return results.every((r) => r.status === 'fulfilled' && r.value);
  }

  private releaseOne(held: HeldKey): Promise<boolean> {
    held.holds -= 1;
    if (held.holds > 0) return Promise.resolve(!held.lost);
    this.active.delete(held);
    this.telemetry?.released(held);
    return held.release();
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

import { randomBytes } from 'node:crypto';
import type { LockBusy, LockGrant } from '../backends/lock-backend.js';
import { LockLostError, LockNotAcquiredError } from '../errors/lock-errors.js';
import { monotonicNow } from '../lease/lease-clock.js';
import type { ProcessSession } from '../session/process-session.js';
import type { LockTelemetry } from '../telemetry/lock-telemetry.js';
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
import type { LockLostReason } from './lock-events.js';
import { LockHandle } from './lock-handle.js';
import { lockScope } from './lock-scope.js';
import type { LockOptions, LockServiceSettings } from './lock-settings.js';

/** What the acquirer is given by the service it works for. */
export interface LockAcquirerParts {
  readonly settings: LockServiceSettings;
  readonly session?: ProcessSession;
  readonly telemetry?: LockTelemetry;
  /** Whether the service is closed: no new lock is taken then. */
  readonly closed: () => boolean;
  readonly onLost: (held: HeldKey, reason: LockLostReason) => void;
}

/**
 * Takes keys for `LockService` and gives them back: checks a call, opens the
 * process session it needs, asks the store for each key (joining the ones
 * the calling chain holds already), and keeps every granted key until its
 * last hold is released.
 */
export class LockAcquirer {
  /** Keys held by this service and not released yet. */
  readonly active = new Set<HeldKey>();
  private readonly instanceId = randomBytes(6).toString('hex');

  constructor(private readonly parts: LockAcquirerParts) {}

  /** The key as stored: the braces keep a lock's keys in one Cluster slot. */
  storeKey(name: string): string {
    return `${this.parts.settings.keyPrefix}{${name}}`;
  }

  /** `LockService.acquire`, unobserved; `name` is what telemetry reports it under. */
  attempt(
    keyOrKeys: string | readonly string[],
    options: LockOptions,
    name?: string,
  ): Promise<LockHandle> {
    let attempt: Attempt;
    try {
      if (this.parts.closed())
        throw new LockNotAcquiredError(String(keyOrKeys), 0);
      attempt = newAttempt(
        keyOrKeys,
        options,
        this.parts.settings,
        this.parts.session,
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
    return openSessionFor(session, attempt, this.parts.closed).then((id) =>
      this.start(bindToSession(attempt, id)),
    );
  }

  /**
   * Stops every hold (the service is closing) and forgets them; whether
   * none was held. A hold bound to the session stays bound: it is told when
   * the session, no longer renewed, lapses. Others end with their leases.
   */
  letGoOfAll(): boolean {
    const idle = this.active.size === 0;
    for (const held of this.active) {
      if (held.sessionBound) held.stopRenewing();
      else held.stop();
      this.parts.telemetry?.released(held);
    }
    this.active.clear();
    return idle;
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
      pending = this.parts.settings.backend.acquire(
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
        const result = await this.parts.settings.backend.acquire(
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
    if (this.parts.closed())
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
      backend: this.parts.settings.backend,
      onLost: this.parts.onLost,
    });
    this.active.add(held);
    if (attempt.observed)
      this.parts.telemetry?.held(held, attempt.name ?? name);
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
    this.parts.telemetry?.released(held);
    return held.release();
  }
}

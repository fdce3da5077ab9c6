import { LockLostError } from '../errors/lock-errors.js';
import type { LockBackend } from '../backends/lock-backend.js';
import { monotonicNow } from '../lease/lease-clock.js';
import type { LockLostReason } from './lock-events.js';
import type {
  ProcessSession,
  SessionBound,
} from '../session/process-session.js';
import { sessionOf } from '../session/session-token.js';
import type { HeldKeyInit, LeasePolicy } from './held-key-init.js';
import { LeaseKeeper } from './lease-keeper.js';

/**
 * One lock key held by this process, shared by every reentrant hold of it in
 * the same call chain. It keeps the lease alive (watchdog) or watches it end
 * (explicit lease), and aborts {@link signal} the moment the lock is known lost.
 * Its {@link LeaseKeeper} does the lease keeping: the deadline, renewals and
 * the commands that set the lease.
 */
export class HeldKey implements SessionBound {
  readonly name: string;
  readonly scopeKey: string;
  readonly storeKey: string;
  readonly token: string;
  /** Issued with the grant or by {@link fence}; undefined until then. */
  fencingToken?: number;
  readonly policy: LeasePolicy;
  /** Reentrant holds not yet released. */
  holds = 1;
  /** Created on first use of {@link signal}: most holds never look at it. */
  private controller?: AbortController;
  private lostWith?: LockLostError;
  private lostBecause?: LockLostReason;
  /** A fence request under way, shared by concurrent callers. */
  private fencing?: Promise<number>;
  /** Set by {@link leaveToExpire}: its outcome, which {@link release} answers too. */
  private leaving?: Promise<boolean>;
  /** The session bound to, while bound. */
  private session?: ProcessSession;
  private readonly backend: LockBackend;
  private readonly onLost: HeldKeyInit['onLost'];
  private readonly lease: LeaseKeeper;

  constructor(init: HeldKeyInit) {
    this.name = init.name;
    this.scopeKey = init.scopeKey;
    this.storeKey = init.storeKey;
    this.token = init.token;
    this.fencingToken = init.fencingToken;
    this.policy = init.policy;
    this.backend = init.backend;
    this.onLost = init.onLost;
    this.lease = new LeaseKeeper(this, init);
    const { session } = init.policy;
    if (session) {
      // The session lapsed while the grant was on its way: someone else may
      // hold the lock already.
      if (session.bind(this, sessionOf(this.token) ?? ''))
        this.session = session;
      // Never handed to the caller: nobody to tell.
      else this.markLost('session-expired', false);
    }
  }

  /** The process session lapsed: every hold bound to it is lost. */
  sessionLapsed(): void {
    this.session = undefined;
    this.lease.clampDeadlineToNow();
    if (!this.lease.stopped) this.markLost('session-expired');
  }

  /** Whether the hold is bound to a live process session. */
  get sessionBound(): boolean {
    return this.session !== undefined;
  }

  /** Why the hold was lost; undefined while it is not. */
  get lostReason(): LockLostReason | undefined {
    return this.lost ? this.lostBecause : undefined;
  }

  /** Local estimate (ms since epoch) of when the lease ends; errs early. */
  get expiresAt(): number {
    const end = this.session
      ? Math.min(this.lease.deadline, this.session.liveUntil)
      : this.lease.deadline;
    return Date.now() + (end - monotonicNow());
  }

  get signal(): AbortSignal {
    this.lostIfPastDeadline();
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostWith) this.controller.abort(this.lostWith);
    }
    return this.controller.signal;
  }

  get lost(): boolean {
    this.lostIfPastDeadline();
    return this.lostWith !== undefined;
  }

  /**
   * Whether the hold is known lost, without looking at the deadline or the
   * session as {@link lost} does: for its {@link LeaseKeeper}, whose own
   * timer tells the deadline.
   */
  get knownLost(): boolean {
    return this.lostWith !== undefined;
  }

  /**
   * The deadline passed while no timer could say so (the event loop was
   * blocked): whoever looks is told at once, not at the next timers phase.
   */
  private lostIfPastDeadline(): void {
    if (this.lostWith || this.lease.stopped) return;
    if (monotonicNow() >= this.lease.deadline) this.lease.markLostAtDeadline();
    // Reading the live session tells every hold bound to it if it lapsed.
    else if (this.session && this.session.liveId === undefined)
      this.sessionLapsed();
  }

  /**
   * This hold's fencing token, issued by the store on first use unless the
   * grant brought one. Rejects with `LockLostError` when the lock is no longer
   * ours: a holder whose lease ran out never gets a token.
   */
  fence(): Promise<number> {
    if (this.fencingToken !== undefined)
      return Promise.resolve(this.fencingToken);
    this.fencing ??= this.issueFence().finally(() => {
      this.fencing = undefined;
    });
    return this.fencing;
  }

  private async issueFence(): Promise<number> {
    // `lost` reads the deadline too: a holder past it never gets a token.
    if (this.lost) throw this.lostWith;
    if (this.holds <= 0 || this.lease.stopped) {
      throw new LockLostError(
        this.name,
        `Lock "${this.name}" is no longer held: a fencing token is issued only to its holder`,
      );
    }
    const fence = await this.backend.fence(this.storeKey, this.token);
    if (fence === undefined) {
      this.markLost('taken-over');
      throw this.lostWith;
    }
    this.fencingToken = fence;
    return fence;
  }

  /**
   * Sets the remaining lease to `leaseMs`; false (and lost) when the lock is
   * no longer ours. On a watchdog hold it also becomes the lease the watchdog
   * renews to from now on (every third of it); an explicit lease is set once
   * and then ends.
   */
  extend(leaseMs: number): Promise<boolean> {
    return this.lease.extend(leaseMs);
  }

  /**
   * Frees the key in the store. False when it had been lost already. After
   * {@link leaveToExpire} it frees nothing and answers what that did.
   */
  release(): Promise<boolean> {
    if (this.leaving) return this.leaving;
    return this.free();
  }

  /**
   * Gives the key up without freeing it: it stays taken in the store for
   * `ms` more, then expires by itself. Its lease is set to `ms` if it is
   * still ours, after any renewal on its way (so that none lands after it);
   * renewals, the session binding and the deadline watch stop, so nothing
   * here keeps it longer, and a process that dies meanwhile leaves nothing
   * longer behind. Nobody here holds it any more (`holds` is 0): a chain that
   * locks it again asks the store. A key already lost or released is freed
   * as {@link release} would. False (and lost) when it was no longer ours.
   */
  leaveToExpire(ms: number): Promise<boolean> {
    if (this.leaving) return this.leaving;
    this.holds = 0;
    if (this.lease.stopped || this.lost) {
      this.leaving = this.free();
      return this.leaving;
    }
    this.stop();
    const endsAt = monotonicNow() + ms;
    const send = (): Promise<boolean> => {
      const left = Math.ceil(endsAt - monotonicNow());
      // The renewal before it took the whole time: nothing is left to keep.
      if (left <= 0) return this.backend.release(this.storeKey, this.token);
      return this.backend.extend(this.storeKey, this.token, left);
    };
    this.leaving = this.lease.afterLeaseCommands(send).then((owned) => {
      if (!owned) this.markLost('taken-over');
      return owned;
    });
    return this.leaving;
  }

  private free(): Promise<boolean> {
    this.stop();
    const wasLost = this.lost;
    let pending: Promise<boolean>;
    try {
      pending = this.backend.release(this.storeKey, this.token);
    } catch (error) {
      // A backend that throws instead of rejecting still fails as a rejection.
      return Promise.reject(error as Error);
    }
    return pending.then((released) => {
      if (!released && !wasLost) this.markLost('taken-over');
      return released && !wasLost;
    });
  }

  /**
   * Stops renewing its own lease but stays bound to its session, which tells
   * it when it lapses (the service is closing while a handler may still run
   * under the hold).
   */
  stopRenewing(): void {
    this.lease.stopRenewing();
  }

  /** Stops renewing and watching the deadline (release, shutdown). */
  stop(): void {
    this.lease.stopped = true;
    this.session?.unbind(this);
    this.session = undefined;
    this.lease.clearTimers();
  }

  /** Not private: its {@link LeaseKeeper} marks it lost too. */
  markLost(reason: LockLostReason, report = true): void {
    if (this.lostWith) return;
    this.lostBecause = reason;
    this.lease.clampDeadlineToNow();
    this.session?.unbind(this);
    this.session = undefined;
    this.lease.clearTimers();
    this.lostWith = new LockLostError(
      this.name,
      `Lock "${this.name}" was lost (${reason})`,
    );
    this.controller?.abort(this.lostWith);
    if (report) this.onLost(this, reason);
  }
}

import { LockBackendError, LockLostError } from '../errors/lock-errors.js';
import type { LockBackend } from '../backends/lock-backend.js';
import {
  clockDriftMs,
  leaseDeadline,
  monotonicNow,
} from '../lease/lease-clock.js';
import type { LockLostReason } from './lock-events.js';
import type {
  ProcessSession,
  SessionBound,
} from '../session/process-session.js';
import { sessionOf } from '../session/session-token.js';

/** How a hold keeps its lease. */
export interface LeasePolicy {
  /** Lease length in ms. */
  readonly leaseMs: number;
  /** True: renew every leaseMs/3 until released (no explicit `leaseTime`). */
  readonly watchdog: boolean;
  /**
   * The process session the hold is bound to (its token names it): the hold
   * is lost when the session lapses, whatever its own lease.
   */
  readonly session?: ProcessSession;
}

export interface HeldKeyInit {
  readonly name: string;
  /** Identifies this hold in the async-call-chain scope: owning service + store key. */
  readonly scopeKey: string;
  readonly storeKey: string;
  readonly token: string;
  /** When the backend issued one with the grant. */
  readonly fencingToken?: number;
  readonly policy: LeasePolicy;
  /** Lease the backend actually set; may be shorter than the policy's. */
  readonly grantedLeaseMs: number;
  /** When the acquisition was sent (monotonic ms), so the local expiry errs early, never late. */
  readonly sentAt: number;
  readonly backend: LockBackend;
  readonly onLost: (held: HeldKey, reason: LockLostReason) => void;
}

/**
 * One lock key held by this process, shared by every reentrant hold of it in
 * the same call chain. It keeps the lease alive (watchdog) or watches it end
 * (explicit lease), and aborts {@link signal} the moment the lock is known lost.
 *
 * It keeps a deadline on the monotonic clock: the send time of the last
 * command that set the lease (the grant, or a renewal Redis confirmed), plus
 * the lease, less an allowance for clock drift. Redis cannot expire the key
 * before then, so no other process can have taken the lock yet. At that
 * deadline the hold counts as lost, whatever renewal may still be on its way.
 * A renewal is always due before the deadline, so the deadline needs a timer
 * of its own only while a renewal is on its way or failing, and for an
 * explicit lease: an uncontended hold costs one timer, as it did before.
 */
export class HeldKey implements SessionBound {
  readonly name: string;
  readonly scopeKey: string;
  readonly storeKey: string;
  readonly token: string;
  /** Issued with the grant or by {@link fence}; undefined until then. */
  fencingToken?: number;
  readonly policy: LeasePolicy;
  /**
   * The lease the watchdog renews to (a watchdog hold's `extend` changes it),
   * or the explicit lease.
   */
  private leaseMs: number;
  /** See the class comment: monotonic ms. */
  private deadline: number;
  /** Reentrant holds not yet released. */
  holds = 1;
  /** Created on first use of {@link signal}: most holds never look at it. */
  private controller?: AbortController;
  private lostWith?: LockLostError;
  private lostBecause?: LockLostReason;
  /** A fence request under way, shared by concurrent callers. */
  private fencing?: Promise<number>;
  /** The next renewal. */
  private timer?: NodeJS.Timeout;
  /** Marks the hold lost at {@link deadline}. */
  private deadlineTimer?: NodeJS.Timeout;
  /** Commands that set the lease (renewals, extend) not answered yet. */
  private leaseCommands = 0;
  /**
   * The last of them: the next one is sent after it. None until the first:
   * most holds set no lease after their grant, and a promise made for each
   * one costs every hold.
   */
  private lastLeaseCommand?: Promise<unknown>;
  private stopped = false;
  private renewalsStopped = false;
  /** Set by {@link leaveToExpire}: its outcome, which {@link release} answers too. */
  private leaving?: Promise<boolean>;
  /** The session bound to, while bound. */
  private session?: ProcessSession;
  private readonly backend: LockBackend;
  private readonly onLost: HeldKeyInit['onLost'];

  constructor(init: HeldKeyInit) {
    this.name = init.name;
    this.scopeKey = init.scopeKey;
    this.storeKey = init.storeKey;
    this.token = init.token;
    this.fencingToken = init.fencingToken;
    this.policy = init.policy;
    this.backend = init.backend;
    this.onLost = init.onLost;
    this.leaseMs = init.policy.leaseMs;
    // The grant's lease counts from the call, wait included; the drift
    // allowance is on the lease alone.
    this.deadline =
      init.sentAt +
      init.grantedLeaseMs -
      clockDriftMs(Math.min(init.grantedLeaseMs, init.policy.leaseMs));
    const left = this.deadline - monotonicNow();
    if (init.grantedLeaseMs < init.policy.leaseMs) {
      // Handed over from the queue with a short lease: top it up to the full
      // lease at a third of what may be left of it. A short hold has released
      // by then and never pays the extra round trip; a hand-off that arrived
      // late (little left by the estimate) is confirmed at once.
      this.scheduleRenewal(Math.max(0, left / 3));
    } else if (left < (init.policy.leaseMs * 2) / 3) {
      // Granted so long after asking that the lease, begun at some unknown
      // moment since, may be mostly gone by the local estimate: set the full
      // lease now, which also confirms that the lock is still ours.
      this.scheduleRenewal(0);
    } else if (init.policy.watchdog) {
      this.scheduleRenewal(init.policy.leaseMs / 3);
    } else {
      this.armDeadline();
    }
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
    this.deadline = Math.min(this.deadline, monotonicNow());
    if (!this.stopped) this.markLost('session-expired');
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
      ? Math.min(this.deadline, this.session.liveUntil)
      : this.deadline;
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
   * The deadline passed while no timer could say so (the event loop was
   * blocked): whoever looks is told at once, not at the next timers phase.
   */
  private lostIfPastDeadline(): void {
    if (this.lostWith || this.stopped) return;
    if (monotonicNow() >= this.deadline) this.markLostAtDeadline();
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
    if (this.holds <= 0 || this.stopped) {
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
  async extend(leaseMs: number): Promise<boolean> {
    if (this.lost || this.stopped) return false;
    // A renewal or top-up due later would undo this lease: this one stands.
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.policy.watchdog) this.leaseMs = leaseMs;
    let owned: boolean;
    try {
      owned = await this.setLease(() => leaseMs);
    } catch (error) {
      if (this.policy.watchdog) this.retryRenewal();
      throw error;
    }
    if (owned && this.policy.watchdog) this.scheduleRenewal(this.leaseMs / 3);
    return owned;
  }

  /**
   * Sets the lease in Redis (`leaseOf()` when it is sent) and moves the
   * deadline; false (and lost) when the lock is no longer ours. Commands that
   * set the lease go one after another, so the one sent last is the one Redis
   * keeps, and the deadline is watched while any is on its way.
   */
  private setLease(leaseOf: () => number): Promise<boolean> {
    const send = async (): Promise<boolean> => {
      if (this.lost || this.stopped) return false;
      const leaseMs = leaseOf();
      const sentAt = monotonicNow();
      const owned = await this.backend.extend(
        this.storeKey,
        this.token,
        leaseMs,
      );
      if (!owned) {
        this.markLost('taken-over');
        return false;
      }
      // Told lost at the deadline while the answer was on its way: it stays lost.
      if (this.lost) return false;
      this.deadline = leaseDeadline(sentAt, leaseMs);
      return true;
    };
    this.leaseCommands += 1;
    this.armDeadline();
    const result = this.afterLeaseCommands(send);
    this.lastLeaseCommand = result.catch(() => undefined);
    return result.then(
      (owned) => {
        this.leaseCommands -= 1;
        // A watchdog renews before the new deadline; an explicit lease just ends.
        if (owned && this.policy.watchdog && this.leaseCommands === 0)
          this.disarmDeadline();
        else this.armDeadline();
        return owned;
      },
      (error: unknown) => {
        this.leaseCommands -= 1;
        throw error;
      },
    );
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
    if (this.stopped || this.lost) {
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
    this.leaving = this.afterLeaseCommands(send).then((owned) => {
      if (!owned) this.markLost('taken-over');
      return owned;
    });
    return this.leaving;
  }

  /** Runs `send` once every lease command sent before has settled. */
  private afterLeaseCommands<T>(send: () => Promise<T>): Promise<T> {
    return this.lastLeaseCommand
      ? this.lastLeaseCommand.then(send, send)
      : Promise.resolve().then(send);
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
    this.renewalsStopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Stops renewing and watching the deadline (release, shutdown). */
  stop(): void {
    this.stopped = true;
    this.session?.unbind(this);
    this.session = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.disarmDeadline();
  }

  private scheduleRenewal(delayMs: number): void {
    clearTimeout(this.timer);
    if (this.stopped || this.renewalsStopped) return;
    this.timer = setTimeout(() => void this.renew(), Math.max(1, delayMs));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    // `lost` also tells a renewal due so late (a blocked event loop) that the
    // deadline passed.
    if (this.stopped || this.lost) return;
    this.timer = undefined;
    try {
      const owned = await this.setLease(() => this.leaseMs);
      if (owned && this.policy.watchdog) this.scheduleRenewal(this.leaseMs / 3);
    } catch (error) {
      if (!(error instanceof LockBackendError)) throw error;
      this.retryRenewal();
    }
  }

  /**
   * Redis is away: try again before the lease runs out. The deadline timer
   * says "lost" if no renewal gets through in time.
   */
  private retryRenewal(): void {
    const left = this.deadline - monotonicNow();
    if (left > 0 && !this.lostWith)
      this.scheduleRenewal(Math.max(50, left / 3));
  }

  /**
   * Marks the hold lost at its deadline: an explicit lease just ends there; a
   * watchdog's renewals did not get through in time.
   */
  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    if (this.stopped || this.lostWith) return;
    this.deadlineTimer = setTimeout(
      this.markLostAtDeadline,
      Math.max(0, this.deadline - monotonicNow()),
    );
    this.deadlineTimer.unref();
  }

  private disarmDeadline(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
  }

  private readonly markLostAtDeadline = (): void => {
    if (this.stopped) return;
    this.markLost(this.policy.watchdog ? 'renewal-failed' : 'lease-expired');
  };

  private markLost(reason: LockLostReason, report = true): void {
    if (this.lostWith) return;
    this.lostBecause = reason;
    this.deadline = Math.min(this.deadline, monotonicNow());
    this.session?.unbind(this);
    this.session = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.disarmDeadline();
    this.lostWith = new LockLostError(
      this.name,
      `Lock "${this.name}" was lost (${reason})`,
    );
    this.controller?.abort(this.lostWith);
    if (report) this.onLost(this, reason);
  }
}

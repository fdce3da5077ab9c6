import { LockBackendError } from '../errors/lock-errors.js';
import type { LockBackend } from '../backends/lock-backend.js';
import {
  clockDriftMs,
  leaseDeadline,
  monotonicNow,
} from '../lease/lease-clock.js';
import type { HeldKey } from './held-key.js';
import type { HeldKeyInit } from './held-key-init.js';

/**
 * Keeps the lease of one {@link HeldKey}: renews it (watchdog) or watches it
 * end (explicit lease), and marks the hold lost when it can no longer be sure
 * the lease is in force.
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
export class LeaseKeeper {
  /** See the class comment: monotonic ms. */
  deadline: number;
  /** Set by `HeldKey.stop` (release, shutdown): nothing renews or watches any more. */
  stopped = false;
  /**
   * The lease the watchdog renews to (a watchdog hold's `extend` changes it),
   * or the explicit lease.
   */
  private leaseMs: number;
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
  private renewalsStopped = false;
  private readonly backend: LockBackend;

  constructor(
    private readonly held: HeldKey,
    init: HeldKeyInit,
  ) {
    this.backend = init.backend;
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
  }

  /** What `HeldKey.extend` does: see there. */
  async extend(leaseMs: number): Promise<boolean> {
    if (this.held.lost || this.stopped) return false;
    // A renewal or top-up due later would undo this lease: this one stands.
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.held.policy.watchdog) this.leaseMs = leaseMs;
    let owned: boolean;
    try {
      owned = await this.setLease(() => leaseMs);
    } catch (error) {
      if (this.held.policy.watchdog) this.retryRenewal();
      throw error;
    }
    if (owned && this.held.policy.watchdog)
      this.scheduleRenewal(this.leaseMs / 3);
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
      if (this.held.lost || this.stopped) return false;
      const leaseMs = leaseOf();
      const sentAt = monotonicNow();
      const owned = await this.backend.extend(
        this.held.storeKey,
        this.held.token,
        leaseMs,
      );
      if (!owned) {
        this.held.markLost('taken-over');
        return false;
      }
      // Told lost at the deadline while the answer was on its way: it stays lost.
      if (this.held.lost) return false;
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
        if (owned && this.held.policy.watchdog && this.leaseCommands === 0)
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

  /** Runs `send` once every lease command sent before has settled. */
  afterLeaseCommands<T>(send: () => Promise<T>): Promise<T> {
    return this.lastLeaseCommand
      ? this.lastLeaseCommand.then(send, send)
      : Promise.resolve().then(send);
  }

  /** What `HeldKey.stopRenewing` does: see there. */
  stopRenewing(): void {
    this.renewalsStopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Stops the renewal timer and the deadline watch (the hold stopped or was lost). */
  clearTimers(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.disarmDeadline();
  }

  /** The lease, or the session that backs it, is over: the deadline is now at the latest. */
  clampDeadlineToNow(): void {
    this.deadline = Math.min(this.deadline, monotonicNow());
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
    if (this.stopped || this.held.lost) return;
    this.timer = undefined;
    try {
      const owned = await this.setLease(() => this.leaseMs);
      if (owned && this.held.policy.watchdog)
        this.scheduleRenewal(this.leaseMs / 3);
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
    if (left > 0 && !this.held.knownLost)
      this.scheduleRenewal(Math.max(50, left / 3));
  }

  /**
   * Marks the hold lost at its deadline: an explicit lease just ends there; a
   * watchdog's renewals did not get through in time.
   */
  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    if (this.stopped || this.held.knownLost) return;
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

  readonly markLostAtDeadline = (): void => {
    if (this.stopped) return;
    this.held.markLost(
      this.held.policy.watchdog ? 'renewal-failed' : 'lease-expired',
    );
  };
}

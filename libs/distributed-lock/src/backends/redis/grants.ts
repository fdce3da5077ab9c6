import {
  isFresh,
  leaseDeadline,
  monotonicNow,
} from '../../lease/lease-clock.js';
import type { PassStreak } from './local-holds.js';
import type { LockContext } from './lock-context.js';
import { handoffId } from './lock-keys.js';
import { busy } from './lock-replies.js';
import { isDue, type Waiter } from './waiter.js';

/**
 * Handing a lock to the waiter it came for. Every grant is measured from the
 * earliest moment its lease can have been set; one that may have lapsed by
 * the time it is read (a paused process, a late wake-up) is confirmed with
 * Redis before the waiter runs.
 */
export class Grants {
  constructor(private readonly c: LockContext) {}

  /**
   * Gives `waiter` the lock handed to it, whose lease of `leaseMs` was set no
   * earlier than `setAfter` (monotonic ms). A grant that may have lapsed by
   * now never reaches the waiter as it is: it is confirmed with Redis first
   * (see {@link confirmGrant}). Returns false when the waiter had already
   * settled or is being confirmed; if it left without the lock, the lock is
   * given back.
   */
  grant(
    waiter: Waiter,
    fencingToken: number | undefined,
    setAfter: number,
    leaseMs: number,
    streak?: PassStreak,
  ): boolean {
    if (!this.c.waiters.has(waiter) || waiter.confirming) {
      if (waiter.outcome === 'not-acquired')
        this.c.releases.giveBack(waiter.key, waiter.token, fencingToken);
      return false;
    }
    if (!isFresh(leaseDeadline(setAfter, leaseMs), leaseMs)) {
      waiter.confirming = true;
      void this.c.calls.track(this.confirmGrant(waiter, fencingToken, streak));
      return true;
    }
    this.c.waiters.settle(waiter, {
      acquired: true,
      fencingToken,
      leaseMs: setAfter + leaseMs - waiter.calledAt,
      handoff: 'remote',
    });
    this.holdLocally(waiter.key, waiter.token, setAfter + leaseMs, streak);
    return true;
  }

  /**
   * Sets `leaseMs` on `key` if `token` (the token it is stored under) still
   * holds it, to confirm a grant that may have lapsed. Resolves when that
   * command was sent (monotonic) if it did, undefined if the lock has moved
   * on. A confirmation that fails, or answers after the caller gave up, would
   * leave the lock held by nobody: it is given back.
   */
  async confirmLease(
    key: string,
    token: string,
    leaseMs: number,
  ): Promise<number | undefined> {
    const sentAt = monotonicNow();
    let reply: unknown;
    try {
      reply = await this.c.calls.call(
        this.c.commands.extend(key, token, leaseMs),
        'acquire',
        (late) => {
          if (Number(late) === 1) this.c.releases.giveBack(key, token);
        },
      );
    } catch (error) {
      this.c.releases.giveBack(key, token);
      throw error;
    }
    return Number(reply) === 1 ? sentAt : undefined;
  }

  /** Remembers that `token` holds `key` under contention, so that it may pass it on here. */
  holdLocally(
    key: string,
    token: string,
    expiresAt: number,
    streak?: PassStreak,
  ): void {
    if (!this.c.closed) this.c.holds.record(key, token, expiresAt, streak);
  }

  /**
   * A lock was handed to `token`: wake its waiter, or pass the lock on if
   * nobody here wants it. The hand-off's lease was set after the waiter
   * queued, and after `sentAt` (monotonic) when the answer of a command sent
   * then brought it.
   */
  deliver(
    token: string,
    fencingToken: number,
    key: string,
    sentAt?: number,
    streak?: PassStreak,
  ): void {
    const { waiters } = this.c;
    const id = handoffId(key, token);
    const waiter = waiters.get(id);
    if (waiter) {
      // While giving up, the cancel script decides who keeps the lock.
      if (waiter.cancelling) waiter.handedOver = true;
      else
        this.grant(
          waiter,
          fencingToken,
          Math.max(waiter.queuedAt, sentAt ?? -Infinity),
          this.c.handoffLease(waiter),
          streak,
        );
    } else if (waiters.claimed.delete(id)) {
      // The waiter already took this lock (giving up, or on a check).
    } else if (waiters.acquiring.has(id)) {
      waiters.earlyHandoffs.set(id, fencingToken);
    } else {
      // Nobody here wants this lock any more: pass it on at once.
      this.c.releases.giveBack(key, token, fencingToken);
    }
  }

  /** An acquisition that is not waiting after all gives back a hand-off that came early. */
  forgetEarlyHandoff(key: string, token: string): void {
    const fencingToken = this.c.waiters.takeEarlyHandoff(handoffId(key, token));
    if (fencingToken !== undefined)
      this.c.releases.giveBack(key, token, fencingToken);
  }

  /**
   * A grant that may have lapsed: sets the waiter's full lease if its token
   * still holds the lock, counted from now, and only then lets it run. If the
   * lock has moved on (its lease ran out while this process was paused, and
   * another took it), the waiter queues again within what is left of its
   * wait.
   */
  private async confirmGrant(
    waiter: Waiter,
    fencingToken: number | undefined,
    streak: PassStreak | undefined,
  ): Promise<void> {
    const { key, token, leaseMs } = waiter;
    const { waiters } = this.c;
    let sentAt: number | undefined;
    try {
      sentAt = await this.confirmLease(key, token, leaseMs);
    } catch (error) {
      waiter.confirming = false;
      waiters.settle(waiter, error as Error);
      return;
    }
    waiter.confirming = false;
    if (sentAt !== undefined) {
      const granted = waiters.settle(waiter, {
        acquired: true,
        fencingToken,
        leaseMs: sentAt + leaseMs - waiter.calledAt,
        handoff: 'remote',
      });
      if (granted) this.holdLocally(key, token, sentAt + leaseMs, streak);
      else this.c.releases.giveBack(key, token);
      return;
    }
    // The lapsed grant took its entry out of the queue.
    waiter.entry = undefined;
    // Giving up already (the grant came to its cancel), or its time ran out
    // while it was being confirmed: there is nothing left to leave.
    if (waiter.cancelling || isDue(waiter)) {
      waiters.settle(waiter, busy(0));
      return;
    }
    try {
      await this.c.checks.requeueOne(key, waiter);
    } catch (error) {
      waiters.settle(waiter, error as Error);
      return;
    }
    this.c.waiting.waitOn(waiter);
  }
}
